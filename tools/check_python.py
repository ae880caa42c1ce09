"""Exit with a clear message unless this is a Python the series is tested on (course.py asks it before it
creates .venv).

Written so that any Python can run it, an old one included: no f-strings, nothing imported but sys.
"""
import sys

OLDEST, NEWEST = (3, 11), (3, 13)  # pyproject.toml's requires-python says the same (tests/test_environment.py)


def problem(version, executable):
    """None for a supported version, else the sentence to print."""
    if OLDEST <= tuple(version[:2]) <= NEWEST:
        return None
    return ("%s is Python %d.%d; the series runs on Python %d.%d to %d.%d. Install one of them and name it, "
            "e.g. `python3.12 course.py notebooks` (or `make notebooks PYTHON=python3.12`); delete .venv first if it "
            "was made with another Python"
            % ((executable, version[0], version[1]) + OLDEST + NEWEST))


if __name__ == "__main__":
    said = problem(sys.version_info, sys.executable)
    if said:
        sys.stderr.write("make: " + said + "\n")
        sys.exit(1)
