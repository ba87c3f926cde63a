"""The package list, found rather than listed (``pyproject.toml`` has everything else): each
folder of the design is a subpackage of ``kafka_chaos`` (its ``package-dir``), and every
package below it is found with setuptools' own finder, so a new subpackage cannot be left out
of the wheel."""

from setuptools import find_packages, setup

FOLDERS = {"kafka_chaos": "kafka_chaos", "kafka_chaos.clusters": "clusters",
           "kafka_chaos.workloads": "workloads", "kafka_chaos.nemesis": "nemesis",
           "kafka_chaos.history": "history", "kafka_chaos.analysis": "analysis"}

setup(packages=[found for package, folder in FOLDERS.items()
                for found in [package, *(f"{package}.{sub}" for sub in find_packages(folder))]])
