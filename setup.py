"""The four top-level folders install as one namespaced package, `mast_otel.*`: `collector/`
is `mast_otel.collector`, `processors/` is `mast_otel.processors`, and so on, so installing
mast-otel puts nothing at top level but `mast_otel`. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = ("collector", "processors", "schemas", "dashboards")
PACKAGES = find_packages(include=[f"{folder}*" for folder in FOLDERS])

setup(
    packages=[f"mast_otel.{package}" for package in PACKAGES],
    package_dir={f"mast_otel.{folder}": folder for folder in FOLDERS},
)
