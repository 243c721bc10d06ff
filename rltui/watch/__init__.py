"""`rltui watch PATH`: a saved policy playing episodes, drawn in the terminal (or recorded
to an animated SVG, a GIF or an MP4 with --record), without training; and the same view
inside the training dashboard, where each new episode takes the run's latest parameters.

- `player`: the Player, a policy stepping through episodes of one env on one device
- `params`: the shapes a config's policy has, and parameters from elsewhere checked against them
- `live`: a Player on a running session's latest parameters (the dashboard's watch view)
- `describe`: the text beside the picture, for the step just taken
- `record`: episodes written to an animated SVG, a GIF or an MP4, each frame captioned
- `video`: the formats --record writes, by suffix, and the GIF and MP4 writers (imageio)
- `command`: the `rltui watch` command: a checkpoint's policy, viewed or recorded
"""
