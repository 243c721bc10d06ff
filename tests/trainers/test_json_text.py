"""trainers.json_text: integers beyond float range read as floats, at the parser's own speed
for text that holds none."""

import json
import math

from trainers import json_text


def test_only_text_with_a_long_run_of_digits_is_parsed_with_a_call_per_integer(monkeypatch):
    calls: list[str] = []
    counting = json.JSONDecoder(parse_int=lambda text: calls.append(text) or json_text._int(text))
    monkeypatch.setattr(json_text, "_GUARDED", counting)
    line = b'{"update": 3, "env_steps": 384, "seeds": {"episode_length": [12, 500]}, "lr": 3e-4}'
    assert json_text.loads(line) == {"update": 3, "env_steps": 384, "seeds": {"episode_length": [12, 500]}, "lr": 3e-4}
    assert calls == []  # the common line: no Python call per integer
    huge, digits = "1" + "0" * 400, "2" * 400
    assert json_text.loads(f'[{huge}, -{huge}, "{digits}", 7, 1{"0" * 5000}]') == [
        math.inf, -math.inf, digits, 7, math.inf]
    assert json_text.loads(f'["{digits}", 7]') == [digits, 7]  # digits in a string: read as they are
