"""The reference agent's file tools: confined to the root, capped, never raising for what the model sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import UsageError
from agentlog.agent.tools import TOOLS, FileTools, ToolOutput
from agentlog.core.jsonvalue import freeze


@pytest.fixture
def tools(tmp_path: Path) -> FileTools:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "README").write_text("readme\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return FileTools(root)


def call(tools: FileTools, name: str, **arguments: object) -> ToolOutput:
    return tools.run(name, json.dumps(arguments))


def test_read_and_list_inside_the_root(tools: FileTools) -> None:
    assert call(tools, "read_file", path="src/main.py") == ToolOutput("print('hi')\n")
    assert call(tools, "read_file", path="./src/../README") == ToolOutput("readme\n")
    assert call(tools, "list_dir", path=".") == ToolOutput("README\nsrc/")
    assert call(tools, "list_dir", path="src") == ToolOutput("main.py")
    assert [tool["function"]["name"] for tool in TOOLS] == ["read_file", "list_dir"]


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd", "..", "a\x00b"])
def test_paths_leaving_the_root_are_refused(tools: FileTools, path: str) -> None:
    for name in ("read_file", "list_dir"):
        output = call(tools, name, path=path)
        assert output.is_error and output.text.startswith("error: ")
        assert "outside" not in output.text.splitlines()[-1] or "outside the project root" in output.text


def test_a_symlink_leading_out_of_the_root_is_refused(tools: FileTools, tmp_path: Path) -> None:
    (tools.root / "link").symlink_to(tmp_path / "secret.txt")
    (tools.root / "dirlink").symlink_to(tmp_path)
    assert call(tools, "read_file", path="link").text == "error: 'link' is outside the project root"
    assert call(tools, "list_dir", path="dirlink").is_error
    (tools.root / "inner").symlink_to(tools.root / "README")  # a symlink that stays inside is fine
    assert call(tools, "read_file", path="inner") == ToolOutput("readme\n")


def test_a_symlink_loop_is_an_error_result(tools: FileTools) -> None:
    (tools.root / "loop").symlink_to("loop")  # Path.resolve raises RuntimeError here before Python 3.13
    (tools.root / "ping").symlink_to("pong")
    (tools.root / "pong").symlink_to("ping")
    for path in ("loop", "loop/inner", "ping", "src/../pong"):
        for name in ("read_file", "list_dir"):
            output = call(tools, name, path=path)
            assert output.is_error and output.text.startswith("error: "), (name, path, output)
            assert str(tools.root) not in output.text


def test_fifos_devices_and_directories_are_not_read(tools: FileTools) -> None:
    os.mkfifo(tools.root / "pipe")  # opening it for reading would block the agent forever
    assert call(tools, "read_file", path="pipe") == ToolOutput("error: 'pipe' is not a regular file", True)
    assert call(tools, "read_file", path="src").is_error
    assert call(tools, "list_dir", path="README").is_error


def test_missing_files_name_the_models_path_not_the_root(tools: FileTools) -> None:
    output = call(tools, "read_file", path="nope.txt")
    assert output == ToolOutput("error: read_file: 'nope.txt': No such file or directory", True)
    assert str(tools.root) not in output.text


@pytest.mark.parametrize("arguments", ["", "not json", "[1]", '{"path": 3}', '{"file": "README"}', "{"])
def test_malformed_arguments_and_unknown_tools_are_error_results(tools: FileTools, arguments: str) -> None:
    output = tools.run("read_file", arguments)
    assert output.is_error and output.text.startswith("error: read_file: the arguments")
    assert tools.run("rm_rf", '{"path": "."}') == ToolOutput(
        "error: unknown tool 'rm_rf'; the tools are read_file and list_dir", True)


def test_output_is_capped(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 5000)
    for index in range(30):
        (tmp_path / f"f{index:02}").touch()
    tools = FileTools(tmp_path, max_bytes=1000, max_entries=10)
    text = call(tools, "read_file", path="big").text
    assert text.startswith("x" * 1000) and text.endswith("[... truncated: big has 5000 bytes; the first 1000 "
                                                         "are shown]")
    listing = call(tools, "list_dir", path=".").text.splitlines()
    assert len(listing) == 11 and listing[-1] == "[... 21 more entries not shown]"


def test_undecodable_bytes_in_names_and_contents_become_valid_text(tmp_path: Path) -> None:
    with open(os.fsencode(tmp_path) + b"/caf\xe9", "wb"):
        pass
    (tmp_path / "bytes.txt").write_bytes(b"ok \xff\xfe\n")
    tools = FileTools(tmp_path)
    listing = call(tools, "list_dir", path=".").text
    assert listing == "bytes.txt\ncaf\ufffd"
    freeze(listing)  # what the recorder logs: no lone surrogates
    assert call(tools, "read_file", path="bytes.txt").text == "ok \ufffd\ufffd\n"
    assert call(tools, "read_file", path=os.fsdecode(b"caf\xe9")).is_error  # not JSON the model could send


def test_the_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory"):
        FileTools(tmp_path / "absent")


@settings(max_examples=200, deadline=None)
@given(path=st.text(st.sampled_from("./\\\x00~:a b*"), max_size=24))
def test_any_path_is_answered_inside_the_root_or_refused(tmp_path_factory: pytest.TempPathFactory,
                                                         path: str) -> None:
    root = tmp_path_factory.getbasetemp() / "prop-root"
    root.mkdir(exist_ok=True)
    (root / "a").mkdir(exist_ok=True)
    tools = FileTools(root)
    for name in ("read_file", "list_dir"):
        output = tools.run(name, json.dumps({"path": path}))
        freeze(output.text)
        if not output.is_error and name == "list_dir":
            assert output.text in ("a/", "(empty directory)")
