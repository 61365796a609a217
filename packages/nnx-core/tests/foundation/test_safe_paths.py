"""The path rule's helpers (docs/durability.md, The path rule) and the bounded readers:
plain names only, no symbolic link below a root (the root itself may be one), a lock file
never followed; JSON / YAML documents too large, too deep or too wide are a ValueError
naming the file, never a RecursionError."""

from __future__ import annotations

import pytest
from _support.disk import tree

from nnx._foundation.bounded import MAX_DEPTH, check_shape, load_json, load_yaml
from nnx._foundation.locking import file_lock
from nnx._foundation.safe_paths import UnsafePathError, check_inside, inside, is_link


@pytest.fixture
def layout(tmp_path):
    """A runs root with one run, and a directory outside it holding a file."""
    root = tmp_path / "runs"
    (root / "a" / "checkpoints").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside\n")
    return root, outside


# -- check_inside / inside / is_link ------------------------------------------------------
def test_a_path_of_plain_entries_under_the_root_is_returned_as_it_is(layout):
    root, _ = layout
    path = root / "a" / "checkpoints" / "last.pt"  # the file need not exist
    assert check_inside(root, path) == path
    assert inside(root, "a", "checkpoints", "last.pt") == path


@pytest.mark.parametrize("name", ["../outside", "..", ".", "", "a/b", "a\\b", "/etc/passwd",
                                  "nul\0byte"])
def test_inside_refuses_a_name_that_is_not_one_plain_entry(layout, name):
    root, _ = layout
    with pytest.raises(UnsafePathError, match="is not a checkpoint tag") as caught:
        inside(root, "a", name, what="checkpoint tag")
    assert isinstance(caught.value, ValueError) and caught.value.link is None


def test_check_inside_refuses_a_path_that_leaves_the_root(layout):
    root, outside = layout
    with pytest.raises(UnsafePathError, match="is not under the runs root"):
        check_inside(root, outside / "secret.txt")
    with pytest.raises(UnsafePathError, match="leaves the runs root"):
        check_inside(root, root / "a" / ".." / ".." / "outside")


@pytest.mark.parametrize("where", ["run", "checkpoints", "file"])
def test_a_symlink_below_the_root_is_refused_naming_the_link(layout, where):
    root, outside = layout
    if where == "run":
        link = root / "b"
        link.symlink_to(outside, target_is_directory=True)
        path = link / "secret.txt"
    elif where == "checkpoints":
        (root / "b").mkdir()
        link = root / "b" / "checkpoints"
        link.symlink_to(outside, target_is_directory=True)
        path = link / "secret.txt"
    else:
        link = root / "a" / "checkpoints" / "last.pt"
        link.symlink_to(outside / "secret.txt")
        path = link
    with pytest.raises(UnsafePathError, match="is a symbolic link") as caught:
        check_inside(root, path)
    assert caught.value.link == link and caught.value.path == path
    assert link.as_posix() in str(caught.value)
    assert is_link(link) and not is_link(root / "a") and not is_link(root / "missing")


def test_the_root_itself_and_what_lies_above_it_may_be_symlinks(tmp_path, layout):
    root, _ = layout
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    path = alias / "a" / "checkpoints" / "last.pt"
    assert check_inside(alias, path) == path
    assert inside(alias, "a", "checkpoints") == alias / "a" / "checkpoints"


# -- file_lock under a root ----------------------------------------------------------------
def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path, layout):
    root, outside = layout
    lock = root / "a" / "checkpoints" / "last.pt.lock"
    lock.symlink_to(outside / "secret.txt")
    before = tree(tmp_path)
    for kwargs in ({}, {"root": root}):  # never followed, with or without a root
        with pytest.raises(UnsafePathError, match="symbolic link"), file_lock(lock, **kwargs):
            pass
    assert tree(tmp_path) == before


def test_a_lock_below_a_symlinked_directory_creates_nothing_anywhere(tmp_path, layout):
    root, outside = layout
    (root / ".leases").symlink_to(outside, target_is_directory=True)
    before = tree(tmp_path)
    with pytest.raises(UnsafePathError) as caught, file_lock(root / ".leases" / "x" / "a.lock",
                                                              root=root):
        pass
    assert caught.value.link == root / ".leases"
    assert tree(tmp_path) == before


# -- bounded readers -------------------------------------------------------------------------
def test_the_bounded_readers_read_what_nnx_writes(tmp_path):
    path = tmp_path / "doc.json"
    path.write_text('{"a": [1, 2.5, {"b": null}], "c": NaN}')
    doc = load_json(path)
    assert doc["a"] == [1, 2.5, {"b": None}] and doc["c"] != doc["c"]
    assert load_yaml(data="train: {n_epochs: 3}\n") == {"train": {"n_epochs": 3}}
    assert load_json(data=b'{"x": 1}') == {"x": 1}


@pytest.mark.parametrize("loader", [load_json, load_yaml])
def test_a_document_nested_too_deeply_to_parse_is_a_value_error(tmp_path, loader):
    path = tmp_path / "deep.doc"
    path.write_text("[" * 200_000 + "]" * 200_000)  # JSON and YAML alike
    # json raises RecursionError (mapped); libyaml stops at its own nesting limit.
    with pytest.raises(ValueError, match=r"deep\.doc (nests too deeply|is not YAML)"):
        loader(path)


@pytest.mark.parametrize("loader", [load_json, load_yaml])
def test_a_document_deeper_than_the_cap_is_a_value_error(tmp_path, loader):
    text = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    with pytest.raises(ValueError, match=f"manifest nests deeper than {MAX_DEPTH} levels"):
        loader(data=text, where="manifest")
    fits = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert loader(data=fits) is not None


def test_a_document_larger_than_the_cap_is_a_value_error_naming_the_file(tmp_path):
    path = tmp_path / "huge.json"
    path.write_text('"' + "x" * 2048 + '"')
    with pytest.raises(ValueError, match=r"huge\.json is larger than 1024 bytes"):
        load_json(path, max_bytes=1024)
    with pytest.raises(ValueError, match="document is larger than 1024 bytes"):
        load_json(data=path.read_bytes(), max_bytes=1024)


def test_yaml_aliases_that_expand_past_a_million_values_are_refused():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    with pytest.raises(ValueError, match="holds more than 1000000 values"):
        load_yaml(data="\n".join(lines) + "\n", where="metadata.yaml")


def test_not_json_and_strict_constants_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match=r"x\.json is not JSON"):
        load_json(data="{", where="x.json")
    with pytest.raises(ValueError, match="not YAML"):
        load_yaml(data="a: [b, {c\n")

    def strict(name: str) -> object:
        raise ValueError(f"non-finite {name}")

    with pytest.raises(ValueError, match="non-finite Infinity"):
        load_json(data='{"x": Infinity}', parse_constant=strict)
    with pytest.raises(OSError):
        load_json(tmp_path / "missing.json")


def test_check_shape_walks_without_recursion():
    deep: list = []
    node = deep
    for _ in range(100_000):  # far past Python's recursion limit
        child: list = []
        node.append(child)
        node = child
    with pytest.raises(ValueError, match="nests deeper"):
        check_shape(deep, "built")
    assert check_shape({"a": [1, {"b": 2}]}, "small") == {"a": [1, {"b": 2}]}
