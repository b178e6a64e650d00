"""Observed-state validation: read/write rules, unsafe trees, artifacts, real subprocesses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from custody_helpers import DELIVERY, make_site, preview, sha

from contracts import ArtifactRef, CustodyVerdict, ErrorCode, ExecutionSite
from execution_system.custody import FileCustody

Workspace = Callable[[], Path]


def _validate(
    custody: FileCustody,
    mode: str,
    paths: tuple[str, ...] = (),
    artifacts: tuple[ArtifactRef, ...] = (),
    site: ExecutionSite | None = None,
) -> CustodyVerdict:
    site = site or make_site()
    cap = custody.issue(site, "read" if mode == "read" else "write", paths)
    return custody.validate(preview(cap.token, site, artifacts))


def test_unchanged_tree_under_read_is_accepted_at_the_same_savepoint(
    custody: FileCustody, opened: Workspace
) -> None:
    head = custody.head(DELIVERY)
    cap = custody.issue(make_site(), "read")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.accepted
    assert verdict.savepoint == head
    assert verdict.changed == ()


def test_change_under_read_is_refused_naming_the_first_changed_path(
    custody: FileCustody, opened: Workspace
) -> None:
    cap = custody.issue(make_site(), "read")
    (opened() / "src" / "app.py").write_text("edited\n")
    (opened() / "docs" / "guide.md").unlink()
    verdict = custody.validate(preview(cap.token, make_site()))
    assert not verdict.accepted
    assert verdict.code is ErrorCode.CUSTODY_WRITE_UNDER_READ
    assert verdict.path == "docs/guide.md"
    assert verdict.changed == ("docs/guide.md", "src/app.py")


EDITS: dict[str, Callable[[Path], None]] = {
    "added": lambda ws: (ws / "docs" / "new.md").write_text("new\n"),
    "removed": lambda ws: (ws / "docs" / "guide.md").unlink(),
    "modified": lambda ws: (ws / "docs" / "guide.md").write_text("rewritten\n"),
    "mode": lambda ws: (ws / "docs" / "guide.md").chmod(0o600),
    "link": lambda ws: (ws / "docs" / "to-src").symlink_to("../src"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_write_outside_allowed_prefixes_is_refused(
    custody: FileCustody, opened: Workspace, edit: str
) -> None:
    cap = custody.issue(make_site(), "write", ("src/",))
    (opened() / "src" / "ok.py").write_text("inside\n")
    EDITS[edit](opened())
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_WRITE_OUTSIDE_PATHS
    assert verdict.path.startswith("docs/")
    assert "src/ok.py" in verdict.changed


def test_write_inside_prefixes_is_accepted_without_moving_the_head(
    custody: FileCustody, opened: Workspace
) -> None:
    head = custody.head(DELIVERY)
    before = len(custody.savepoints(DELIVERY))
    cap = custody.issue(make_site(), "write", ("src",))
    (opened() / "src" / "app.py").write_text("edited\n")
    (opened() / "src" / "pkg").mkdir()
    (opened() / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (opened() / "src" / "run.sh").chmod(0o700)
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.accepted
    assert verdict.changed == ("src/app.py", "src/pkg/mod.py", "src/run.sh")
    assert verdict.savepoint not in (None, head)
    assert custody.head(DELIVERY) == head
    assert len(custody.savepoints(DELIVERY)) == before + 1


def test_write_prefix_matches_whole_components_only(
    custody: FileCustody, opened: Workspace
) -> None:
    cap = custody.issue(make_site(), "write", ("src",))
    (opened() / "src2").mkdir()
    (opened() / "src2" / "sneaky.py").write_text("x\n")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_WRITE_OUTSIDE_PATHS
    assert verdict.path == "src2/sneaky.py"


def test_write_with_no_prefixes_may_change_anything(
    custody: FileCustody, opened: Workspace
) -> None:
    cap = custody.issue(make_site(), "write")
    for edit in EDITS.values():
        edit(opened())
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.accepted


def test_refused_validation_records_no_savepoint(custody: FileCustody, opened: Workspace) -> None:
    before = custody.savepoints(DELIVERY)
    cap = custody.issue(make_site(), "read")
    (opened() / "README.md").write_text("edited\n")
    assert not custody.validate(preview(cap.token, make_site())).accepted
    assert custody.savepoints(DELIVERY) == before


def test_symlinks_inside_are_recorded_as_links(custody: FileCustody, opened: Workspace) -> None:
    cap = custody.issue(make_site(), "write")
    (opened() / "docs" / "up").symlink_to("..")
    (opened() / "dangling").symlink_to("not/there")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.accepted
    assert verdict.savepoint is not None
    entries = {e.path: e for e in custody.manifest(DELIVERY, verdict.savepoint)}
    assert entries["docs/up"].link
    assert entries["docs/up"].sha256 == sha(b"..")
    assert entries["src/readme-link"].link


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("abs", "/etc/passwd"),
        ("up", ".."),
        ("deep/up", "../../x"),
        ("sneaky", "src/../../outside"),
    ],
)
def test_symlink_escaping_the_workspace_is_refused(
    custody: FileCustody, opened: Workspace, link: str, target: str
) -> None:
    cap = custody.issue(make_site(), "write")
    path = opened() / link
    path.parent.mkdir(exist_ok=True)
    path.symlink_to(target)
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_SYMLINK_ESCAPE
    assert verdict.path == link


def test_symlink_chain_that_only_really_escapes_is_refused(
    custody: FileCustody, opened: Workspace
) -> None:
    # Lexically "here/.." is inside; really it is the workspace's parent.
    cap = custody.issue(make_site(), "write")
    (opened() / "here").symlink_to(".")
    (opened() / "parent").symlink_to("here/..")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_SYMLINK_ESCAPE
    assert verdict.path == "parent"


def test_fifo_is_refused(custody: FileCustody, opened: Workspace) -> None:
    cap = custody.issue(make_site(), "write")
    os.mkfifo(opened() / "src" / "pipe")
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_SPECIAL_FILE
    assert verdict.path == "src/pipe"
    assert "FIFO" in verdict.message


def test_socket_is_refused(custody: FileCustody, opened: Workspace) -> None:
    cap = custody.issue(make_site(), "write")
    # AF_UNIX paths are limited to ~108 bytes: bind via a short relative path.
    cwd = os.getcwd()
    server = socket.socket(socket.AF_UNIX)
    try:
        os.chdir(opened())
        server.bind("sock")
    finally:
        os.chdir(cwd)
    try:
        verdict = custody.validate(preview(cap.token, make_site()))
    finally:
        server.close()
    assert verdict.code is ErrorCode.CUSTODY_SPECIAL_FILE
    assert verdict.path == "sock"


def test_setuid_file_is_refused(custody: FileCustody, opened: Workspace) -> None:
    cap = custody.issue(make_site(), "write")
    (opened() / "src" / "run.sh").chmod(0o4755)
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_SPECIAL_FILE


@pytest.mark.parametrize("name", [b"bad\xffname", b"new\nline"])
def test_unrepresentable_names_are_refused(
    custody: FileCustody, opened: Workspace, name: bytes
) -> None:
    cap = custody.issue(make_site(), "write")
    fd = os.open(os.fsencode(opened()) + b"/" + name, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_PATH_TRAVERSAL


@pytest.mark.parametrize(
    "artifact_id", ["../outside.txt", "/etc/passwd", "src/../../x", "./src/app.py", "src//app.py"]
)
def test_artifact_ids_that_traverse_are_refused(
    custody: FileCustody, opened: Workspace, artifact_id: str
) -> None:
    ref = ArtifactRef(kind="file", id=artifact_id, digest=sha(b"x"))
    verdict = _validate(custody, "read", artifacts=(ref,))
    assert verdict.code is ErrorCode.CUSTODY_PATH_TRAVERSAL


def test_artifacts_must_exist_and_match(custody: FileCustody, opened: Workspace) -> None:
    good = ArtifactRef(kind="file", id="src/app.py", digest=sha(b"print('app')\n"))
    report = ArtifactRef(kind="report", id="../not-a-file", digest=sha(b"r"))
    assert _validate(custody, "read", artifacts=(good, report)).accepted
    for ref in [
        ArtifactRef(kind="file", id="src/app.py", digest=sha(b"other")),
        ArtifactRef(kind="file", id="src/missing.py", digest=sha(b"")),
        ArtifactRef(kind="file", id="src/readme-link", digest=sha(b"../README.md")),
    ]:
        verdict = _validate(custody, "read", artifacts=(ref,))
        assert verdict.code is ErrorCode.CUSTODY_ARTIFACT_MISMATCH
        assert verdict.path == ref.id


def test_missing_workspace_is_refused(custody: FileCustody, opened: Workspace) -> None:
    cap = custody.issue(make_site(), "read")
    opened().rename(opened().with_name("moved"))
    verdict = custody.validate(preview(cap.token, make_site()))
    assert verdict.code is ErrorCode.CUSTODY_WORKSPACE_UNKNOWN


def _run_executor(custody: FileCustody, token: str, script: str) -> dict[str, object]:
    """Run a real executor process the way the command executor protocol does."""
    env = {**os.environ, "EXECSYS_CAPABILITY": token}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=custody.workspace(DELIVERY),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result = json.loads(done.stdout)
    assert isinstance(result, dict)
    return result


def test_symlink_escape_made_by_a_real_subprocess_is_refused(
    custody: FileCustody, opened: Workspace
) -> None:
    site = make_site()
    cap = custody.issue(site, "write", ("src/",))
    script = (
        "import json, os\n"
        "assert os.environ['EXECSYS_CAPABILITY']\n"
        "os.symlink('/etc/passwd', 'src/leak')\n"
        "print(json.dumps({'status': 'completed', 'output': {}}))\n"
    )
    assert _run_executor(custody, cap.token, script)["status"] == "completed"
    verdict = custody.validate(preview(cap.token, site))
    assert verdict.code is ErrorCode.CUSTODY_SYMLINK_ESCAPE
    assert verdict.path == "src/leak"


def test_path_traversal_made_by_a_real_subprocess_is_refused(
    custody: FileCustody, opened: Workspace
) -> None:
    site = make_site()
    cap = custody.issue(site, "write", ("src/",))
    script = (
        "import hashlib, json, pathlib\n"
        "data = b'exfiltrated'\n"
        "pathlib.Path('../outside.txt').write_bytes(data)\n"
        "digest = 'sha256:' + hashlib.sha256(data).hexdigest()\n"
        "print(json.dumps({'status': 'completed', 'output': {}, 'artifacts': [\n"
        "    {'kind': 'file', 'id': '../outside.txt', 'digest': digest}]}))\n"
    )
    result = _run_executor(custody, cap.token, script)
    raw = result["artifacts"]
    assert isinstance(raw, list)
    artifacts = tuple(ArtifactRef.model_validate(item) for item in raw)
    verdict = custody.validate(preview(cap.token, site, artifacts))
    assert verdict.code is ErrorCode.CUSTODY_PATH_TRAVERSAL
    assert verdict.path == "../outside.txt"


# --- protected subtrees -------------------------------------------------------------------


def _validate_protected(
    custody: FileCustody,
    paths: tuple[str, ...],
    protected: tuple[str, ...],
    edit: Callable[[], object],
) -> CustodyVerdict:
    """Issue, let ``edit`` change the workspace as the turn would, then validate.

    The edit comes after the issue: a change older than the capability is an
    unattributed write, refused for that reason alone.
    """
    cap = custody.issue(make_site(), "write", paths, protected=protected)
    edit()
    return custody.validate(preview(cap.token, make_site()))


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("paths", [(), ("docs",)])
def test_a_change_under_a_protected_subtree_is_refused_even_where_writes_are_allowed(
    custody: FileCustody, opened: Workspace, edit: str, paths: tuple[str, ...]
) -> None:
    head = custody.head(DELIVERY)
    before = len(custody.savepoints(DELIVERY))
    verdict = _validate_protected(custody, paths, ("docs/",), lambda: EDITS[edit](opened()))
    assert not verdict.accepted
    assert verdict.code is ErrorCode.CUSTODY_PROTECTED_PATH
    assert verdict.path.startswith("docs/")
    assert custody.head(DELIVERY) == head
    assert len(custody.savepoints(DELIVERY)) == before


def test_changes_beside_a_protected_subtree_are_accepted(
    custody: FileCustody, opened: Workspace
) -> None:
    def edit() -> None:
        (opened() / "src" / "app.py").write_text("edited\n")
        (opened() / "docs2").mkdir()
        (opened() / "docs2" / "other.md").write_text("a sibling whose name extends 'docs'\n")

    verdict = _validate_protected(custody, (), ("docs", "src/vendor"), edit)
    assert verdict.accepted, verdict.message
    assert verdict.changed == ("docs2/other.md", "src/app.py")


def test_a_protected_file_itself_is_guarded(custody: FileCustody, opened: Workspace) -> None:
    def edit() -> None:
        (opened() / "README.md").write_text("rewritten\n")
        (opened() / "src" / "app.py").write_text("edited\n")

    verdict = _validate_protected(custody, (), ("README.md",), edit)
    assert (verdict.code, verdict.path) == (ErrorCode.CUSTODY_PROTECTED_PATH, "README.md")
