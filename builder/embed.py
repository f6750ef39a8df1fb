"""Shell lines that write repository files into an image, verbatim, through quoted heredocs.
The text lands in the definition itself, so editing a file changes the layer's key and
rebuilds that layer, and a reader of the .def sees exactly what the image holds."""


def heredoc(path_expr: str, text: str, end: str) -> list:
    """Lines writing ``text`` to the (shell-expanded) ``path_expr``."""
    lines = text.rstrip("\n").splitlines()
    if end in lines:
        raise ValueError(f"the text for {path_expr} contains the heredoc end marker {end}")
    return [f"cat > {path_expr} <<'{end}'", *lines, end]


# Where pip puts pure-Python modules in the image's venv.
SITE_PACKAGES = ("site_packages=\"$(python -c 'import sysconfig; "
                 "print(sysconfig.get_paths()[\"purelib\"])')\"")
