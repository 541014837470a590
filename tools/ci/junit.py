"""What the tools/ci scripts share: the command line (a ctest JUnit file, ctest --output-junit
FILE, and one optional count) and the test cases read from that file."""
import os
import sys
import xml.etree.ElementTree as ET


def testcases_and_count(usage, default_count):
    """The <testcase> elements of the JUnit file named by argv[1], and argv[2] (or default_count).
    Exits with `usage` on a wrong command line, or saying why the file could not be read."""
    if len(sys.argv) not in (2, 3):
        sys.exit(usage)
    count = int(sys.argv[2]) if len(sys.argv) == 3 else default_count
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        tool = os.path.basename(sys.argv[0]).removesuffix(".py")
        sys.exit(f"{tool}: cannot read {sys.argv[1]}: {e}")
    return list(root.iter("testcase")), count
