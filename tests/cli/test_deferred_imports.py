"""gymnax's plotting imports wait until something draws. Each test runs in its own process:
what a process has imported is the behaviour under test."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(*code: str, path: Path | None = None) -> dict:
    """Run the pieces of `code` in a fresh interpreter (with `path`, if given, first on
    sys.path); the last prints one JSON object, returned here."""
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (path, ROOT) if p is not None)
    source = "".join(textwrap.dedent(piece) for piece in code)
    done = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_configured_process_imports_gymnax_without_matplotlib_and_still_renders():
    seen = run_python("""
        import json, sys
        from rltui.infra import runtime
        runtime.configure_jax(host_devices=0, compile_cache=False)
        import jax, gymnax
        loaded = sorted({m.split(".")[0] for m in sys.modules} & {"matplotlib", "seaborn", "scipy", "pandas"})
        env, params = gymnax.make("Catch-bsuite")
        _, state = env.reset(jax.random.key(0), params)
        figure, _ = env.render(state, params)  # gymnax draws with matplotlib.pyplot
        import matplotlib.figure, matplotlib.pyplot
        from gymnax.environments.bsuite import catch
        print(json.dumps(dict(loaded=loaded, figure=isinstance(figure, matplotlib.figure.Figure),
                              same=catch.plt.subplots is matplotlib.pyplot.subplots,
                              real=type(sys.modules["matplotlib.pyplot"]).__name__)))
    """)
    assert seen == dict(loaded=[], figure=True, same=True, real="module")


def test_every_command_defers_them_even_without_configuring_jax():
    seen = run_python("""
        import contextlib, io, json, sys
        from rltui import cli
        from trainers.suites import SUITES
        # The other suites' own packages may import matplotlib themselves (jumanji does):
        # listed as not installed, only gymnax's envs are made.
        for suite in SUITES.values():
            sys.modules[suite.package] = None
        with contextlib.redirect_stdout(io.StringIO()) as listing:
            code = cli.main(["envs"])  # makes every env, so imports gymnax
        loaded = sorted({m.split(".")[0] for m in sys.modules} & {"gymnax", "matplotlib", "seaborn"})
        print(json.dumps(dict(code=code, listed="Catch-bsuite" in listing.getvalue(), loaded=loaded)))
    """)
    assert seen == dict(code=0, listed=True, loaded=["gymnax"])


def test_nothing_is_deferred_where_matplotlib_is_already_imported():
    seen = run_python("""
        import json, sys
        import matplotlib.pyplot
        from rltui.infra import deferred_imports
        deferred_imports.install()
        import gymnax
        from gymnax.environments.misc import pong
        print(json.dumps(dict(plt=pong.plt is matplotlib.pyplot, sns="seaborn" in sys.modules)))
    """)
    assert seen == dict(plt=True, sns=True)


def fake_packages(tmp_path: Path, trigger_body: str) -> Path:
    """A trigger package `trig` whose `__init__` runs `trigger_body`, and a deferred package
    `plot` with a submodule `plot.sub`; each records its import in `builtins.PLOT_IMPORTS`."""
    (tmp_path / "trig").mkdir()
    (tmp_path / "trig" / "__init__.py").write_text(textwrap.dedent(trigger_body))
    (tmp_path / "plot").mkdir()
    (tmp_path / "plot" / "__init__.py").write_text("import builtins\nbuiltins.PLOT_IMPORTS = ['plot']\n"
                                                   "NAME = 'plot'\n__version__ = '1.0'\n")
    (tmp_path / "plot" / "sub.py").write_text("import builtins\nbuiltins.PLOT_IMPORTS.append('sub')\nVALUE = 42\n")
    return tmp_path


DEFER_PLOT = """
    import builtins, json, sys
    from rltui.infra import deferred_imports
    deferred_imports.DEFERRED, deferred_imports.TRIGGER = ("plot",), "trig"
    deferred_imports.install()
    import trig
"""


def test_every_import_form_defers_until_first_read(tmp_path):
    path = fake_packages(tmp_path, """
        import plot.sub as aliased
        import plot
        from plot import sub
    """)
    seen = run_python(DEFER_PLOT, """
        before = getattr(builtins, "PLOT_IMPORTS", [])
        in_modules = sorted(m for m in sys.modules if m.split(".")[0] == "plot")
        value = trig.sub.VALUE  # the first read imports the real modules
        after = list(builtins.PLOT_IMPORTS)
        import plot.sub
        import pickle
        trig.sub.WRITTEN = 7  # a write after the import lands on the real module
        print(json.dumps(dict(before=before, in_modules=in_modules, value=value, after=after,
                              aliased=trig.aliased.VALUE, name=trig.plot.NAME, real=type(plot.sub).__name__,
                              written=getattr(plot.sub, "WRITTEN", None),
                              pickled=pickle.loads(pickle.dumps(trig.sub)) is plot.sub,
                              loader=type(trig.__loader__).__name__,
                              finders=[type(f).__module__ for f in sys.meta_path].count(
                                  "rltui.infra.deferred_imports"))))
    """, path=path)
    assert seen == dict(before=[], in_modules=[], value=42, after=["plot", "sub"], aliased=42, name="plot",
                        real="module", written=7, pickled=True, loader="SourceFileLoader", finders=0)


def test_another_threads_imports_are_not_deferred(tmp_path):
    path = fake_packages(tmp_path, """
        import sys, threading
        seen = {}
        def other_thread():
            import plot.sub
            seen["other"] = type(sys.modules["plot.sub"]).__name__
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        OTHER = seen["other"]
    """)
    seen = run_python(DEFER_PLOT, """
        print(json.dumps(dict(other=trig.OTHER)))
    """, path=path)
    assert seen == dict(other="module")


def test_a_module_attribute_read_while_the_trigger_imports_is_a_read(tmp_path):
    path = fake_packages(tmp_path, """
        import plot
        from plot import __version__ as VERSION
    """)
    seen = run_python(DEFER_PLOT, """
        print(json.dumps(dict(version=trig.VERSION, imports=builtins.PLOT_IMPORTS)))
    """, path=path)
    assert seen == dict(version="1.0", imports=["plot"])


def test_a_read_while_the_trigger_imports_gets_the_real_module_and_defers_no_more(tmp_path):
    path = fake_packages(tmp_path, """
        import plot.sub
        READ = plot.sub.VALUE
        import plot.sub as again
    """)
    seen = run_python(DEFER_PLOT, """
        print(json.dumps(dict(read=trig.READ, imports=builtins.PLOT_IMPORTS,
                              again=type(trig.again).__name__, open=deferred_imports._window.open)))
    """, path=path)
    assert seen == dict(read=42, imports=["plot", "sub"], again="module", open=False)
