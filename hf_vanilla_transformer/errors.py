"""The mistakes a user must fix: a value or option that cannot work, a path that is not there, an output that
would replace something, a Hub that cannot be reached. Each message names what was wrong and how to fix it.
The scripts print these in one line with exit status 2 (`cli.run_script`); any other exception is a bug or
something unforeseen and keeps its traceback.

Each is also the built-in exception Python code expects (`except ValueError`, `except TypeError`,
`except FileNotFoundError`), so code that calls the package catches them as before. The files that travel with
a saved model folder (`saving.CODE_FILES`) and `interop/ctranslate2_inference.py` (loaded by path, without the
package) cannot import this module; their refusals are `@strict`'s errors or the built-in ones, and `cli`
names those it treats as the user's.
"""


class UserError(Exception):
    """Something the user must fix, named in the message together with how to fix it."""


class UsageError(UserError, ValueError):
    """A value, option, input or combination of them that cannot work."""


class InputTypeError(UserError, TypeError):
    """An argument of a type that cannot work: one string where a list of texts is taken, None among texts."""


class MissingPathError(UserError, FileNotFoundError):
    """A file or folder the user named (or that an earlier step should have made) is not there."""


class ExistingPathError(UserError, FileExistsError):
    """An output would replace something the command did not make: the user asks for that with --overwrite."""


class OfflineError(UserError, ConnectionError):
    """A Hub name was given but the Hub cannot be reached and the files are not in its cache."""


class CorruptFileError(UserError, OSError):
    """A file of a saved folder does not parse (a download or save cut short): the user makes it again."""


__all__ = [
    "CorruptFileError",
    "ExistingPathError",
    "InputTypeError",
    "MissingPathError",
    "OfflineError",
    "UsageError",
    "UserError",
]
