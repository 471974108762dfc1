"""The suite's own layout: every test file that opens a DDS / ROS 2 domain (a deploy node, a sim2sim bridge, a
transport) is in ``conftest.py``'s transport group, so two workers never run two of them at once."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import TRANSPORT_FILES

HERE = Path(__file__).parent
OPENS_A_DOMAIN = re.compile(r"ROS_DOMAIN_ID|make_transport\(|DdsTransport\(|\"sim2sim\"|deploy_fuzz|"
                            r"from bundles import|Sim2SimBridge\(|\"node\"")
"""What a test file that talks over DDS or ROS 2 contains (a domain id, a transport, the bridge, the node's CLI)."""
NO_DOMAIN = {
    "test_cli.py": "`deploy node --help` and argument errors: the parser exits before any transport",
    "test_extras.py": "a missing extra's one-line error, raised before any transport",
    "test_robot_policy.py": "imports the node's modules with torch blocked; opens no participant",
}
"""Files that match :data:`OPENS_A_DOMAIN` yet open no domain, and why."""


def test_every_file_that_opens_a_domain_is_in_the_transport_group():
    this = Path(__file__).name  # its pattern is text here, not a domain
    matching = {p.name for p in HERE.glob("test_*.py") if p.name != this and OPENS_A_DOMAIN.search(p.read_text())}
    missing = sorted(matching - TRANSPORT_FILES - set(NO_DOMAIN))
    assert not missing, f"add {missing} to tests/conftest.py: TRANSPORT_FILES (or to NO_DOMAIN here, with why)"
    assert not set(NO_DOMAIN) - matching, "NO_DOMAIN names a file that no longer matches: drop it"
    assert all((HERE / name).exists() for name in TRANSPORT_FILES), "TRANSPORT_FILES names a file that is gone"
