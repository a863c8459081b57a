"""rosetctl is Apache-2.0 (issue 34), and every place that states a license or a maintainer says
the same: LICENSE (the standard text), the Ansible collection and role, the .deb's copyright
file (DEP-5), the container image's labels and the package's contact. docs/SECURITY.md sends
reports to a private security advisory, with no e-mail address made up for it."""
from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
SPDX = "Apache-2.0"
MAINTAINER = "rosetctl maintainers"
DEBIAN_TEXT = Path("/usr/share/common-licenses/Apache-2.0")


def test_license_file_is_the_standard_apache_text():
    text = (SOURCE / "LICENSE").read_text()
    if DEBIAN_TEXT.is_file():
        assert text == DEBIAN_TEXT.read_text(), f"LICENSE differs from {DEBIAN_TEXT}"
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert (SOURCE / "ansible" / "LICENSE").read_text() == text, (
        "ansible/LICENSE (what the built collection carries) differs from LICENSE")


def test_the_ansible_collection_and_role_say_apache_and_the_maintainers():
    galaxy = yaml.safe_load((SOURCE / "ansible" / "galaxy.yml").read_text())
    assert galaxy["license"] == [SPDX] and "license_file" not in galaxy, galaxy.get("license")
    assert galaxy["authors"] == [MAINTAINER], galaxy["authors"]
    role = yaml.safe_load((SOURCE / "ansible" / "roles" / "storage" / "meta" / "main.yml").read_text())
    assert role["galaxy_info"]["license"] == SPDX and role["galaxy_info"]["author"] == MAINTAINER


def dep5_paragraphs(text: str) -> list[dict[str, str]]:
    paragraphs = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields, key = {}, None
        for line in block.splitlines():
            if line.startswith(" ") and key:
                fields[key] += "\n" + line[1:]
            else:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        paragraphs.append(fields)
    return paragraphs


def test_the_debian_copyright_file_is_dep5_apache():
    header, *rest = dep5_paragraphs((SOURCE / "deploy" / "debian" / "copyright").read_text())
    assert header["Format"] == "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    files = [p for p in rest if "Files" in p]
    assert files and all(p["License"] == SPDX for p in files), files
    (license_paragraph,) = [p for p in rest if "Files" not in p and p.get("License", "").startswith(SPDX)]
    assert str(DEBIAN_TEXT) in license_paragraph["License"], (
        "the stand-alone License paragraph should point to Debian's copy of the text")


def test_the_image_labels_and_the_package_contact():
    containerfile = (SOURCE / "deploy" / "container" / "Containerfile").read_text()
    assert re.search(r'org\.opencontainers\.image\.licenses="Apache-2\.0"', containerfile)
    assert f'org.opencontainers.image.authors="{MAINTAINER}"' in containerfile
    packaging = (SOURCE / "cmake" / "Packaging.cmake").read_text()
    assert f'CPACK_PACKAGE_CONTACT "{MAINTAINER}")' in packaging, "the .deb's Maintainer is the maintainers"
    # No e-mail address made up for them: not in the package's contact, nor in its changelog.
    changelog = (SOURCE / "deploy" / "debian" / "changelog").read_text()
    for name, text in (("cmake/Packaging.cmake", packaging), ("deploy/debian/changelog", changelog)):
        assert not re.search(r"[\w.+-]+@[\w-]+\.[\w.]+", text), f"{name} names an e-mail address"
    assert f" -- {MAINTAINER}  " in changelog


def test_security_reports_go_to_a_private_advisory_not_an_invented_address():
    text = (SOURCE / "docs" / "SECURITY.md").read_text()
    section = text[text.index("## Reporting a problem"):]
    assert "private\nsecurity advisory" in section or "private security advisory" in section
    assert not re.search(r"[\w.+-]+@[\w-]+\.[\w.]+", section), "no e-mail address is to be made up"
    readme = (SOURCE / "README.md").read_text()
    assert re.search(r"^## License\n\nApache License 2\.0", readme, re.M)
