"""`rltui serve` as a browser meets it: pages that point at the address the browser used
(or the public URL given), a quiet terminal (no line per request, none from a tab's
attach process), and a tab on a run that has ended saying so."""

from __future__ import annotations

import argparse
import contextlib
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from control_client import served
from test_cli import cli_env

pytest.importorskip("textual_serve")

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"  # what textual-serve sets for each tab's command
TOKEN = "s3cret-T0ken"  # what `serving` gives serve unless told otherwise
HANDSHAKE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serving(tmp_path: Path, *options: str, token: str | None = TOKEN):
    """`rltui serve` on a fake run, on a free port of 127.0.0.1, with --token `token` (None:
    serve's own choice): yields (port, output, url), url the address serve said to open,
    output filled in (stdout + stderr) once serve has stopped."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    port = _free_port()
    output: list[str] = []
    if token is not None:
        options = ("--token", token, *options)
    with served(run_dir):
        proc = subprocess.Popen([sys.executable, "-m", "rltui", "serve", str(run_dir), "--port", str(port), *options],
                                cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=lambda: [*map(lines.put, proc.stdout), lines.put(None)], daemon=True)
        reader.start()
        said: list[str] = []
        try:
            deadline = time.monotonic() + 30
            while not any("(Ctrl+C stops)" in line for line in said):  # the line that says where to open it
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                assert line is not None, "".join(said)
                said.append(line)
            url = re.search(r"open (\S+)", said[-1]).group(1)
            while time.monotonic() < deadline and proc.poll() is None:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
                time.sleep(0.2)
            assert proc.poll() is None, "".join(said)
            yield port, output, url
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            reader.join(timeout=30)
            while (line := lines.get_nowait() if not lines.empty() else None) is not None:
                said.append(line)
            output.append("".join(said))


def fetch(port: int, path: str = "/", token: str | None = TOKEN, **headers: str) -> str:
    if token is not None:
        path += ("&" if "?" in path else "?") + f"token={token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    return urllib.request.urlopen(request, timeout=10).read().decode()


def test_a_page_points_at_the_address_its_browser_used(tmp_path):
    # Bound to every address, textual-serve wrote 0.0.0.0 into its pages: nowhere, to a browser.
    with serving(tmp_path) as (port, output, _url):
        page = fetch(port, Host="192.0.2.7:9999")  # as a browser on another machine asks
        assert 'href="http://192.0.2.7:9999/static/css/xterm.css"' in page
        assert 'data-session-websocket-url="ws://192.0.2.7:9999/ws"' in page
        assert f"127.0.0.1:{port}" not in page
        local = fetch(port)
        assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in local
        # Nothing from another site: the page tells no one else it was opened.
        assert not re.search(r"""(?:href|src)=["']https?://(?!127\.0\.0\.1)""", local), local
        assert "xterm.css" in local and "textual.js" in local
    (out,) = output
    assert f"open http://127.0.0.1:{port}/?token={TOKEN} (Ctrl+C stops)" in out
    assert "GET /" not in out and "Python-urllib" not in out, out  # no line per request
    assert "Serving" not in out and "___" not in out, out  # textual-serve's banner, with the bound address


def test_a_page_of_another_site_cannot_drive_the_dashboard(tmp_path):
    with serving(tmp_path) as (port, output, _url):
        with pytest.raises(urllib.error.HTTPError) as refused:
            fetch(port, "/ws", Origin="https://elsewhere.example", **HANDSHAKE)
        assert refused.value.code == 403
    assert "refused a connection from a page of another site (https://elsewhere.example)" in output[0]


def test_a_name_this_machine_does_not_have_is_refused(tmp_path):
    """DNS rebinding: a site whose name comes to point at this machine sends its own name
    as Host and a matching Origin; the page and the websocket are refused all the same."""
    with serving(tmp_path) as (port, output, _url):
        rebound = {"Host": f"rebound.example:{port}", "Origin": f"http://rebound.example:{port}"}
        for path, extra in (("/", {}), ("/ws", HANDSHAKE)):
            with pytest.raises(urllib.error.HTTPError) as refused:
                fetch(port, path, **rebound, **extra)
            assert refused.value.code == 403
        assert "data-session-websocket-url" in fetch(port, Host=f"localhost:{port}")
    assert f"refused a request for another name (rebound.example:{port})" in output[0]


async def test_without_the_token_another_user_can_neither_open_nor_steer_the_dashboard(tmp_path):
    """127.0.0.1 is every local user's: a client without the token printed (another user's
    websocket sending ["stdin", "p"]) is refused the page, its assets and the websocket."""
    import aiohttp

    with serving(tmp_path, token=None) as (port, output, url):  # serve's own token
        assert url.startswith(f"http://127.0.0.1:{port}/?token=")
        token = parse_qs(urlsplit(url).query)["token"][0]
        assert len(token) >= 32
        for path, headers, given in (("/", {}, None), ("/ws", HANDSHAKE, None), ("/static/js/textual.js", {}, None),
                                     ("/ws", HANDSHAKE, token[:-1]), ("/", {"Cookie": f"rltui-token-{port}=x"}, None)):
            with pytest.raises(urllib.error.HTTPError) as refused:
                fetch(port, path, token=given, **headers)
            assert refused.value.code == 403, path
            assert "needs its token" in refused.value.read().decode()
        # As a browser: the address printed opens the page, whose cookie opens the rest.
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
            async with browser.get(url) as page:
                assert page.status == 200
                assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in await page.text()
                cookie = page.cookies[f"rltui-token-{port}"]
                assert cookie["httponly"] and cookie["samesite"] == "Strict"
            async with browser.get(f"http://127.0.0.1:{port}/static/js/textual.js") as script:
                assert script.status == 200
            websocket = await browser.ws_connect(f"ws://127.0.0.1:{port}/ws?width=80&height=24")
            await websocket.close()
        # A script may send it in a header instead.
        assert "data-session-websocket-url" in fetch(port, token=None, Authorization=f"token {token}")
    assert "refused a request from 127.0.0.1 without the dashboard's token (/ws)" in output[0]
    assert "refused a request from 127.0.0.1 with a wrong token (/ws)" in output[0]  # a token one character short
    assert "refused a request from 127.0.0.1 with a wrong token (/)" in output[0]  # a cookie that is not it
    assert output[0].count(token) == 1  # said once, in the address to open


def test_serve_with_no_token_warns_and_serves_anyone(tmp_path):
    with serving(tmp_path, "--no-token", token=None) as (port, output, url):
        assert url == f"http://127.0.0.1:{port}"
        assert "data-session-websocket-url" in fetch(port, token=None)
    assert (f"rltui: warning: serving without a token: anyone who can reach 127.0.0.1:{port} (every user of this "
            "machine included) can steer the run") in output[0]


@pytest.mark.parametrize("options, env, said", [
    (["--token", ""], {}, "rltui: error: --token: expected a token without spaces around it, got ''"),
    ([], {"RLTUI_SERVE_TOKEN": " x"}, "rltui: error: RLTUI_SERVE_TOKEN: expected a token without spaces around it"),
    (["--token", "x", "--no-token"], {}, "rltui serve: error: argument --no-token: not allowed with argument --token"),
])
def test_serve_refuses_a_token_that_is_none(tmp_path, options, env, said):
    from test_cli import rltui

    result = rltui(["serve", str(tmp_path), *options], tmp_path, timeout=60, **env)
    assert result.returncode == 2
    assert said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_serve_with_a_public_url_points_every_page_at_it_and_verbose_logs_requests(tmp_path):
    with serving(tmp_path, "--public-url", "https://runs.example/rltui/", "--verbose") as (port, output, _url):
        page = fetch(port)
        assert 'href="https://runs.example/rltui/static/css/xterm.css"' in page
        assert 'data-session-websocket-url="wss://runs.example/rltui/ws"' in page
    (out,) = output
    assert f"open https://runs.example/rltui/?token={TOKEN} (Ctrl+C stops)" in out
    assert re.search(r'"GET /\?token=\[secret\] HTTP/1.1"\s+200', out), out  # --verbose: the access log, no token
    assert out.count(TOKEN) == 1  # said once, in the address to open


def test_serve_refuses_a_public_url_that_is_not_one(tmp_path):
    from test_cli import rltui

    result = rltui(["serve", str(tmp_path), "--public-url", "runs.example:8000"], tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("rltui: error: --public-url: expected an address such as http://HOST:PORT")


def test_bound_to_every_address_serve_says_to_open_this_machines_name(monkeypatch):
    from rltui.ui import web_server as serve
    monkeypatch.setattr(serve.socket, "gethostname", lambda: "trainer")
    assert serve.open_url("0.0.0.0", 8123) == "http://trainer:8123"
    assert serve.open_url("::", 80) == "http://trainer"
    assert serve.open_url("::1", 8123) == "http://[::1]:8123"
    assert serve.open_url("0.0.0.0", 8123, "https://runs.example") == "https://runs.example"


# --- a tab's attach process -------------------------------------------------------------------


def _attach_in_a_tab(tmp_path, monkeypatch, *, code: int, words: str) -> int:
    from rltui import ui
    from rltui.commands import attach
    from rltui.ui import runner

    def dashboard(remote, *args, **kwargs):
        print(words, file=sys.stderr)
        return code

    monkeypatch.setattr(runner, "run_dashboard", dashboard)
    monkeypatch.setattr(ui, "can_show_dashboard", lambda: True)
    monkeypatch.setenv("TEXTUAL_DRIVER", WEB_DRIVER)
    with served(tmp_path):
        return attach.cmd_attach(argparse.Namespace(run_dir=str(tmp_path), theme=None))


def test_a_tab_that_detaches_says_nothing_on_serves_terminal(tmp_path, monkeypatch, capsys):
    detached = f"Detached; the run goes on (running). Attach again with: rltui attach {tmp_path}\nRun files: {tmp_path}"
    assert _attach_in_a_tab(tmp_path, monkeypatch, code=0, words=detached) == 0
    assert capsys.readouterr().err == ""


def test_a_tab_whose_dashboard_failed_still_says_why(tmp_path, monkeypatch, capsys):
    assert _attach_in_a_tab(tmp_path, monkeypatch, code=1, words="Traceback: the dashboard failed") == 1
    assert "the dashboard failed" in capsys.readouterr().err


# --- a tab on a run that has ended ----------------------------------------------------------


def _ended_run(run_dir: Path, *events: str) -> None:
    (run_dir / "config.toml").write_text('env = "CartPole-v1"\n')
    (run_dir / "events.jsonl").write_text("".join(event + "\n" for event in events))


@pytest.mark.parametrize("in_a_tab", [True, False])
def test_a_run_that_has_ended_is_said_to_have_ended(tmp_path, monkeypatch, capsys, in_a_tab):
    from rltui.commands import attach
    _ended_run(tmp_path, '{"kind": "compiled", "update": 0, "message": "compiled in 1.0 s"}',
               '{"kind": "finished", "update": 40, "message": "stopped at update 40"}')
    shown = []
    monkeypatch.setattr(attach, "show_unavailable", lambda reason, hint: shown.append(reason))
    if in_a_tab:
        monkeypatch.setenv("TEXTUAL_DRIVER", WEB_DRIVER)
    else:
        monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert attach.cmd_attach(argparse.Namespace(run_dir=str(tmp_path), theme=None)) == 2
    said = f"{tmp_path}: the run has ended (stopped: stopped at update 40); its curves: rltui runs {tmp_path}"
    # A tab's terminal is serve's, which has said it once already: the page only.
    assert capsys.readouterr().err.strip() == ("" if in_a_tab else f"rltui: error: {said}")
    assert shown == ([said] if in_a_tab else [])


def test_a_tab_on_a_run_whose_process_went_away_says_it_has_ended(tmp_path, monkeypatch):
    # serve saw the run live: a tab finding no socket, and no final event, finds it gone.
    from rltui.commands import attach
    _ended_run(tmp_path, '{"kind": "compiled", "update": 0, "message": "compiled in 1.0 s"}')
    shown = []
    monkeypatch.setattr(attach, "show_unavailable", lambda reason, hint: shown.append(reason))
    monkeypatch.setenv("TEXTUAL_DRIVER", WEB_DRIVER)
    assert attach.cmd_attach(argparse.Namespace(run_dir=str(tmp_path), theme=None)) == 2
    assert shown == [f"{tmp_path}: the run has ended (its process is gone, without a final event); "
                     f"its curves: rltui runs {tmp_path}"]
