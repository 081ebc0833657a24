"""The warm stage server (privaudit.repro.warm): a stage run there behaves as the same stage run cold.

A toy ``stages`` package (the repository's own hook in ``stages/__init__.py``, a module ``stages.echo``) runs
under a server that preloads a marker module (``xml.dom.minidom``): the child that ran it must see the marker
already imported (it ran warm), its own arguments, working directory, environment and streams, and exit with
its own code; code edited between two runs is imported fresh; what the server cannot take runs cold.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privaudit.repro.warm.client import stage_invocation
from privaudit.repro.warm.protocol import SOCKET_ENV, recv_request, send_message, startup_env, this_request
from privaudit.repro.warm.server import refusal
from privaudit.repro.warm.session import warm_stages

REPO = Path(__file__).resolve().parents[2]
MARKER = "xml.dom.minidom"  # preloaded by the test server; nothing in the toy stage imports it

ECHO = '''
import json, os, sys, time
from toy_lib import VALUE
args = sys.argv[1:]
if args[:1] == ["sleep"]:
    print("pid", os.getpid(), flush=True)
    time.sleep(60)
if args[:1] == ["raise"]:
    raise RuntimeError("toy stage failed")
if args[:1] == ["clock"]:  # the stage's wall so far, as a stage records it, and this process's own age
    from privaudit.planning.timings import _start_seconds, process_seconds
    own = float(open("/proc/uptime").read().split()[0]) - _start_seconds("self")
    print(json.dumps({"seconds": process_seconds(), "own": own, "warm": "xml.dom.minidom" in sys.modules}))
    sys.exit(0)
print(json.dumps({"argv": args, "cwd": os.getcwd(), "env": os.environ.get("TOY_VALUE"), "lib": VALUE,
                  "warm": "xml.dom.minidom" in sys.modules, "pid": os.getpid(), "ppid": os.getppid(),
                  "main": __name__}))
print("to stderr", file=sys.stderr)
sys.exit(int(args[0]) if args and args[0].isdigit() else 0)
'''


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    (tmp_path / "stages").mkdir()
    shutil.copy2(REPO / "stages" / "__init__.py", tmp_path / "stages" / "__init__.py")
    (tmp_path / "stages" / "echo.py").write_text(ECHO)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "toy_lib.py").write_text("VALUE = 1\n")
    (tmp_path / "work").mkdir()
    return tmp_path


def _env(toy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(SOCKET_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join([str(toy / "lib"), str(toy), str(REPO / "src")])
    return env


def _wait_ready(env: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while not Path(env[SOCKET_ENV]).exists():
        if time.monotonic() > deadline:
            pytest.fail("the warm server did not bind its socket within 60 s")
        time.sleep(0.02)


def _echo(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stages.echo", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def _sleeping_stage(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], int]:
    """A client running ``stages.echo sleep`` and the pid of the process that runs the stage."""
    client = subprocess.Popen([sys.executable, "-m", "stages.echo", "sleep"], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, text=True)
    return client, int(client.stdout.readline().split()[1])


def _assert_gone(pid: int) -> None:
    """``pid`` ends within 5 s."""
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.05)


def test_a_stage_runs_warm_with_its_own_arguments_directory_environment_and_exit_code(toy: Path) -> None:
    log = toy / "warm.jsonl"
    with warm_stages(_env(toy), preload=[MARKER], log=log) as env:
        _wait_ready(env)
        env = {**env, "TOY_VALUE": "from the client"}
        done = _echo(env, toy / "work", "3", "--flag", "x y")
        assert done.returncode == 3, done.stderr
        out = json.loads(done.stdout)
        assert out["warm"] is True  # the server's preloaded module: it ran in a fork of the server
        assert out["argv"] == ["3", "--flag", "x y"] and out["main"] == "__main__"
        assert out["cwd"] == str(toy / "work") and out["env"] == "from the client"
        assert done.stderr.strip() == "to stderr"  # the client's own stderr, nothing added
        failed = _echo(env, toy / "work", "raise")
        assert failed.returncode == 1 and "RuntimeError: toy stage failed" in failed.stderr  # as a cold run
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["module"], r["exit"], r["pid"]) for r in runs] == [("stages.echo", 3, out["pid"]), ("stages.echo", 1, runs[1]["pid"])]


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="process start times come from Linux /proc")
def test_a_warm_stage_counts_its_wall_from_the_start_of_the_process_dvc_launched(toy: Path) -> None:
    """The fork runs the stage, but DVC waited from the client's start: a client that spent 1 s before handing
    the run over (a ``sitecustomize`` that sleeps) makes the stage's recorded wall >= 1 s, while the fork itself
    is younger; a client name inherited from a process that is gone is ignored."""
    (toy / "lib" / "sitecustomize.py").write_text(
        "import os, time\nif os.environ.get('TOY_CLIENT_SLEEP'):\n    time.sleep(float(os.environ['TOY_CLIENT_SLEEP']))\n")
    with warm_stages(_env(toy), preload=[MARKER]) as env:
        _wait_ready(env)
        done = _echo({**env, "TOY_CLIENT_SLEEP": "1.0"}, toy / "work", "clock")
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["warm"] is True and out["seconds"] >= 1.0 > out["own"], out
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cold = _echo({**_env(toy), "PRIVAUDIT_WARM_CLIENT": gone.stdout.strip()}, toy / "work", "clock")
    out = json.loads(cold.stdout)
    assert out["warm"] is False and abs(out["seconds"] - out["own"]) < 0.5, out


def test_a_stage_waits_for_a_server_that_is_still_importing_but_a_light_one_does_not(toy: Path) -> None:
    (toy / "lib" / "slow_mod.py").write_text("import time\ntime.sleep(3)\n")
    shutil.copy2(toy / "stages" / "echo.py", toy / "stages" / "user_code.py")  # a NO_WAIT stage's name
    with warm_stages(_env(toy), preload=[MARKER, "slow_mod"]) as env:
        light = subprocess.run([sys.executable, "-m", "stages.user_code"], cwd=toy, env=env, capture_output=True,
                               text=True, timeout=60)
        assert not Path(env[SOCKET_ENV]).exists()  # it did not wait for the server
        assert json.loads(light.stdout)["warm"] is False and light.returncode == 0
        waited = _echo(env, toy)  # the server was still importing slow_mod: this one waits, then runs there
        assert json.loads(waited.stdout)["warm"] is True and waited.returncode == 0


def test_a_server_that_dies_while_importing_leaves_the_stages_cold(toy: Path) -> None:
    (toy / "lib" / "dying_mod.py").write_text("import os, time\ntime.sleep(1)\nos._exit(3)\n")
    with warm_stages(_env(toy), preload=["dying_mod"]) as env:
        done = _echo(env, toy, "4")
        assert done.returncode == 4 and json.loads(done.stdout)["warm"] is False


def test_edited_code_is_imported_fresh_in_every_run(toy: Path) -> None:
    with warm_stages(_env(toy), preload=[MARKER, "toy_lib"]) as env:  # the server imported toy_lib (VALUE = 1)
        _wait_ready(env)
        first = json.loads(_echo(env, toy).stdout)
        (toy / "lib" / "toy_lib.py").write_text("VALUE = 2\n")
        (toy / "stages" / "echo.py").write_text(ECHO.replace('"main": __name__', '"main": "edited"'))
        second = json.loads(_echo(env, toy).stdout)
    assert first["warm"] and second["warm"] and first["pid"] != second["pid"]
    assert (first["lib"], first["main"]) == (1, "__main__") and (second["lib"], second["main"]) == (2, "edited")


def test_what_the_server_cannot_take_runs_cold(toy: Path) -> None:
    env = _env(toy)
    env["PYTHONHASHSEED"] = "1"
    with warm_stages(env, preload=[MARKER]) as warm:
        _wait_ready(warm)
        other = _echo({**warm, "PYTHONHASHSEED": "2"}, toy)  # another interpreter start-up: refused
        assert other.returncode == 0 and json.loads(other.stdout.splitlines()[0])["warm"] is False
        assert "runs cold: start-up environment differs from the server's (PYTHONHASHSEED)" in other.stderr
        options = subprocess.run([sys.executable, "-X", "utf8", "-m", "stages.echo"], cwd=toy, env=warm,
                                 capture_output=True, text=True, timeout=60)  # an interpreter option: cold, quietly
        assert json.loads(options.stdout.splitlines()[0])["warm"] is False and "runs cold" not in options.stderr
    missing = {**env, SOCKET_ENV: str(toy / "no-server.sock")}  # not there (yet): cold, quietly
    cold = _echo(missing, toy, "4")
    assert cold.returncode == 4 and json.loads(cold.stdout)["warm"] is False and "warm" not in cold.stderr


def test_a_signal_to_the_stage_process_reaches_the_warm_stage(toy: Path) -> None:
    with warm_stages(_env(toy), preload=[MARKER]) as env:
        _wait_ready(env)
        client, child = _sleeping_stage(env, toy)
        assert child != client.pid
        client.send_signal(signal.SIGTERM)  # as DVC or a timeout stops a stage
        assert client.wait(timeout=30) == 128 + signal.SIGTERM
        client.stdout.close()
        _assert_gone(child)


def test_any_name_of_the_servers_interpreter_runs_warm_another_environment_does_not(toy: Path) -> None:
    """``make audit`` runs the server from the console script (``.venv/bin/python3.11``) and DVC the stages with
    ``python``: one interpreter, two names. Another environment (``sys.prefix``) is refused."""
    bindir = Path(sys.executable).parent
    names = [bindir / n for n in ("python", "python3", f"python3.{sys.version_info.minor}")]
    alias = next((p for p in names if p.exists() and p.name != Path(sys.executable).name), None)
    if alias is None:
        pytest.skip(f"{bindir} has no other name for this interpreter")
    with warm_stages(_env(toy), preload=[MARKER]) as env:
        _wait_ready(env)
        done = subprocess.run([str(alias), "-m", "stages.echo"], cwd=toy, env=env, capture_output=True, text=True,
                              timeout=60)
        assert json.loads(done.stdout)["warm"] is True, done.stderr
    request = this_request("stages.echo", [])
    other = dataclasses.replace(request, prefix="/elsewhere/venv")
    assert refusal(request, startup_env(request.env)) is None
    assert "the server runs" in (refusal(other, startup_env(other.env)) or "")


def test_a_symlinked_venv_is_the_same_environment(tmp_path: Path) -> None:
    """A clone whose ``.venv`` is a symlink to another checkout's venv: the stages' ``sys.prefix`` names the link,
    the server's the target; one environment, served warm (every stage ran cold)."""
    link = tmp_path / "venv-link"
    link.symlink_to(sys.prefix, target_is_directory=True)
    request = this_request("stages.echo", [])
    linked = dataclasses.replace(request, prefix=str(link))
    assert refusal(linked, startup_env(linked.env)) is None


def test_a_killed_client_takes_its_warm_stage_with_it(toy: Path) -> None:
    """SIGKILL cannot be passed on: the server sees the client's connection close and ends the stage, as the end of
    a cold stage's process would (no orphan left writing outputs)."""
    with warm_stages(_env(toy), preload=[MARKER]) as env:
        _wait_ready(env)
        client, child = _sleeping_stage(env, toy)
        client.kill()
        client.wait(timeout=30)
        client.stdout.close()
        _assert_gone(child)


def test_the_server_and_its_socket_are_gone_after_the_block(toy: Path) -> None:
    with warm_stages(_env(toy), preload=[MARKER]) as env:
        _wait_ready(env)
        folder = Path(env[SOCKET_ENV]).parent
        assert oct(folder.stat().st_mode & 0o777) == "0o700"  # no other user can connect
    assert not folder.exists()


def test_privaudit_warm_runs_the_command_and_returns_its_exit_code(toy: Path) -> None:
    env = _env(toy)
    cmd = [sys.executable, "-m", "privaudit.cli", "warm", "--", sys.executable, "-c",
           f"import os, sys; print(os.environ['{SOCKET_ENV}']); sys.exit(5)"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 5 and "privaudit-warm-" in done.stdout
    usage = subprocess.run([sys.executable, "-m", "privaudit.cli", "warm"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 2 and "privaudit warm -- dvc repro" in usage.stderr


def test_stage_invocation_takes_only_plain_python_dash_m_stages() -> None:
    assert stage_invocation(["python", "-m", "stages.ltu", "--params", "p.yaml"]) == ("stages.ltu", ["--params", "p.yaml"])
    assert stage_invocation(["python", "-m", "stages.ltu"]) == ("stages.ltu", [])
    assert stage_invocation(["python", "-X", "importtime", "-m", "stages.ltu"]) is None
    assert stage_invocation(["python", "-m", "privaudit.cli", "verdict"]) is None
    assert stage_invocation(["python", "stages/ltu.py"]) is None


def test_startup_env_holds_what_a_running_interpreter_cannot_take_back() -> None:
    env = {"PYTHONHASHSEED": "0", "PYTHONPATH": "/x", "OMP_NUM_THREADS": "1", "HOME": "/h", "PRIVAUDIT_X": "1"}
    assert startup_env(env) == {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}


def test_the_client_imports_only_the_standard_library() -> None:
    """A stage's first import under a server: nothing heavy, nothing of privaudit beyond the client itself."""
    probe = ("import sys; import privaudit.repro.warm.client; "
             "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('privaudit', 'numpy', 'torch', 'pandas', 'great_expectations', 'sklearn', 'scipy', 'pydantic', 'yaml'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")}).stdout.split()
    assert out == ["privaudit", "privaudit.repro", "privaudit.repro.warm", "privaudit.repro.warm.client",
                   "privaudit.repro.warm.protocol"]


def test_a_server_whose_preload_initialised_cuda_does_not_serve_and_stages_run_cold(toy: Path) -> None:
    """A forked child cannot use a GPU its parent initialised: such a server exits before binding its socket."""
    (toy / "lib" / "cuda_init_mod.py").write_text(
        "import sys, types\n"  # a stand-in for a library that initialises CUDA at import
        "sys.modules['torch'] = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))\n")
    with warm_stages(_env(toy), preload=[MARKER, "cuda_init_mod"]) as env:
        done = _echo(env, toy)
        assert done.returncode == 0 and json.loads(done.stdout)["warm"] is False  # ran cold
        assert not Path(env[SOCKET_ENV]).exists()


def test_ingest_runs_cold_while_the_server_imports_and_warm_once_it_serves(toy: Path) -> None:
    """``stages.COLD_WHILE_STARTING``: the first heavy stage does not wait for a server that is still importing
    (its own imports beside the server's take less than the wait); once the socket is there it runs warm."""
    (toy / "lib" / "slow_mod.py").write_text("import time\ntime.sleep(3)\n")
    shutil.copy2(toy / "stages" / "echo.py", toy / "stages" / "ingest.py")
    with warm_stages(_env(toy), preload=[MARKER, "slow_mod"]) as env:
        cold = subprocess.run([sys.executable, "-m", "stages.ingest"], cwd=toy, env=env, capture_output=True,
                              text=True, timeout=60)
        assert not Path(env[SOCKET_ENV]).exists()  # it did not wait for the server
        assert cold.returncode == 0 and json.loads(cold.stdout)["warm"] is False
        _wait_ready(env)
        warm = subprocess.run([sys.executable, "-m", "stages.ingest"], cwd=toy, env=env, capture_output=True,
                              text=True, timeout=60)
        assert warm.returncode == 0 and json.loads(warm.stdout)["warm"] is True


def _fake_server_client(tmp_path: Path) -> tuple[socket.socket, subprocess.Popen[str]]:
    """A client process running ``run_on_server`` against a socket this test answers by hand, and the connection
    as soon as the client has connected (its request may not be sent yet: :func:`_take_request`)."""
    path = tmp_path / "fake.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    code = ("import sys\nfrom privaudit.repro.warm.client import run_on_server\n"
            "sys.exit(run_on_server(sys.argv[1], 'stages.echo', []))")
    client = subprocess.Popen([sys.executable, "-c", code, str(path)], text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    listener.settimeout(30)
    conn, _ = listener.accept()
    listener.close()
    return conn, client


def _take_request(conn: socket.socket) -> None:
    _request, fds = recv_request(conn)
    for fd in fds:
        os.close(fd)


def test_a_signal_before_the_stage_pid_reaches_the_stage_once_the_pid_comes(tmp_path: Path) -> None:
    """The client catches its signals from before it sends its request (CI once saw a client die of the SIGTERM
    meant for its stage: it had installed its handlers after sending). Here the SIGTERM comes after the request and
    before the server's answer (sent as soon as the client has connected, perhaps before its request: the old
    client died of it then); the stage (a stand-in process) gets it when its pid comes."""
    conn, client = _fake_server_client(tmp_path)
    client.send_signal(signal.SIGTERM)
    _take_request(conn)
    time.sleep(0.5)
    assert client.poll() is None  # caught, not taken
    stage = subprocess.Popen(["sleep", "60"])
    send_message(conn, pid=stage.pid)
    assert stage.wait(timeout=10) == -signal.SIGTERM  # passed on
    send_message(conn, exit=-signal.SIGTERM)
    conn.close()
    assert client.wait(timeout=10) == 128 + signal.SIGTERM


def test_a_signal_before_a_refusal_is_the_clients_own(tmp_path: Path) -> None:
    """No stage took the run (refused): the signal caught meanwhile is then this process's, as for a cold stage."""
    conn, client = _fake_server_client(tmp_path)
    _take_request(conn)
    client.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert client.poll() is None
    send_message(conn, refused="a test refusal")
    conn.close()
    assert client.wait(timeout=10) == -signal.SIGTERM


def test_privaudit_warm_runs_the_stages_with_its_own_python(toy: Path, tmp_path: Path) -> None:
    """``.venv/bin/privaudit warm -- .venv/bin/dvc repro`` without an activated venv: DVC's ``python -m stages.x``
    found the system's python (no privaudit: ModuleNotFoundError). warm puts its interpreter's folder first on
    PATH, and says so; a PATH that already finds it is left as it is."""
    from privaudit.repro.warm.session import stages_path

    own = Path(sys.executable).parent
    if not (own / "python").exists():
        pytest.skip(f"no `python` beside {sys.executable} (not a venv-style layout)")
    elsewhere = tmp_path / "otherbin"
    elsewhere.mkdir()
    (elsewhere / "python").write_text("#!/bin/sh\nexit 3\n")
    (elsewhere / "python").chmod(0o755)
    env = {**_env(toy), "PATH": os.pathsep.join([str(elsewhere), "/usr/bin", "/bin"])}
    cmd = [sys.executable, "-m", "privaudit.cli", "warm", "--", "sh", "-c", "command -v python"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent.resolve() == own.resolve()
    assert f"`python` on PATH is {elsewhere / 'python'}, not this environment's" in done.stderr
    fine = {"PATH": os.pathsep.join([str(own), "/usr/bin"])}
    assert stages_path(fine) == (fine, None)
