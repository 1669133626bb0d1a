"""PIN background jobs and integration events."""


def distribution() -> str:
    """The name this package is installed under (pyproject.toml's project.name: the import package and the command
    are `pin`, the distribution is not), read from the installed metadata, for every install hint."""
    from importlib.metadata import packages_distributions

    names = packages_distributions().get(__name__)
    return names[0] if names else __name__
