"""The package list, found rather than listed by hand (issue 31).

Everything else is in pyproject.toml.  The card keeps ``viewer/`` and
``addons/`` at the top of the repository, but they ship inside the
``chatkit_trace`` namespace (``chatkit_trace.viewer``, ``chatkit_trace.addons``)
so nothing generic lands in site-packages; ``packages.find`` in pyproject.toml
cannot rename a found package, so the mapping is computed here: every package
under ``chatkit_trace/`` as it is, and every package under ``viewer/`` and
``addons/`` renamed into the namespace.  A module added anywhere ships without
touching this file (tests/test_packaging.py compares a built wheel with the
tree).
"""

from setuptools import find_namespace_packages, setup

MAPPED = {"viewer": "chatkit_trace.viewer", "addons": "chatkit_trace.addons"}

# namespace packages too: the data folders (data/, templates/, report/template/,
# route/presets/) are importable names that setuptools wants listed
EXCLUDE = ["*__pycache__*"]
packages = find_namespace_packages(include=["chatkit_trace", "chatkit_trace.*"], exclude=EXCLUDE)
package_dir = {"chatkit_trace": "chatkit_trace"}
for folder, name in MAPPED.items():
    for found in find_namespace_packages(include=[folder, f"{folder}.*"], exclude=EXCLUDE):
        renamed = name + found[len(folder) :]
        packages.append(renamed)
        package_dir[renamed] = found.replace(".", "/")

setup(packages=packages, package_dir=package_dir)
