"""The supported environments' static facts match the environments themselves."""

from trainers.envs import OBS_SIZES, SUPPORTED_ENVS, make_env


def test_obs_sizes_match_the_built_environments():
    assert set(OBS_SIZES) == set(SUPPORTED_ENVS)
    assert {env: make_env(env).obs_size for env in SUPPORTED_ENVS} == OBS_SIZES
