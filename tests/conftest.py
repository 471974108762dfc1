"""Suite-wide collection rules.

Under pytest-xdist (``scripts/test.sh`` runs ``-n 2 --dist loadgroup``), every test that starts a deploy node,
a sim2sim bridge or a DDS / ROS 2 participant joins one group, ``transport``, so those tests run one after
another on a single worker, as they do in a serial run. Their domain ids are chosen per process (``os.getpid()``
plus an offset) and Unitree's topics have no namespace, so two such tests on two workers could share a domain
and see each other's robot. Everything else (learning, physics, export, ...) spreads over the workers.
"""

from __future__ import annotations

import pytest

TRANSPORT_FILES = {
    "test_arm_deploy.py", "test_dds_transport.py", "test_deploy_e2e.py", "test_deploy_fuzz.py",
    "test_gait_report.py", "test_height_map.py", "test_menagerie_robot.py", "test_new_task.py",
    "test_object_deploy.py", "test_operator_start.py", "test_rclpy_transport.py", "test_readme_tour.py",
    "test_robot_log.py", "test_terrain.py", "test_unitree_transport.py",
}
TRANSPORT_TESTS = {"test_gait_benchmark_trains_evaluates_and_judges_in_sim2sim"}  # in other files


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in TRANSPORT_FILES or item.originalname in TRANSPORT_TESTS:
            item.add_marker(pytest.mark.xdist_group("transport"))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run when the grouping did not take: pytest-xdist 3.8 marks a group by renaming the test's id, which
    pytest 9.2 no longer reads (pyproject.toml pins pytest < 9.2)."""
    if not session.config.getoption("loadgroup", False):
        return  # not an xdist worker under --dist loadgroup
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(f"xdist's loadgroup did not group {len(lost)} tests (e.g. {lost[0]}): the transport "
                                "tests would run on both workers at once; install pytest < 9.2")


def pytest_configure(config: pytest.Config) -> None:
    """Refuse ``--dist loadgroup`` under a pytest that ignores its groups (the check above, said up front); on an
    xdist worker, torch's operators in the test process itself run on 1 thread, the plan training uses
    (``ctrl_rl.utils.threads``): an OpenMP team of 2 beside another worker's busy core stalls at every barrier."""
    import os

    major, minor = (int(x) for x in pytest.__version__.split(".")[:2])
    if config.getoption("dist", "no") == "loadgroup" and (major, minor) >= (9, 2):
        raise pytest.UsageError(f"pytest {pytest.__version__} ignores pytest-xdist's test groups, so the transport "
                                "tests would run on both workers at once: pip install 'pytest<9.2' (pyproject.toml's "
                                "test extra)")

    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
