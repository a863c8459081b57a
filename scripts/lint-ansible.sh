#!/usr/bin/env bash
# Lints the Ansible collection (ansible/) offline with Debian's ansible-test.
#
# ansible-test wants the collection at .../ansible_collections/<namespace>/<name> inside a git
# tree, so this lints a copy. Most sanity tests (pep8, pylint, yamllint, validate-modules,
# import, ansible-doc, runtime-metadata) first pip-install pinned linters into a virtual
# environment, which needs network; they are not run. What stands in for them:
# tests/integration/test_ansible.py renders ansible-doc for the module and the role and checks the
# module's argument spec against its DOCUMENTATION.
set -euo pipefail
cd "$(dirname "$0")/.."

offline_tests=(
  action-plugin-docs compile empty-init future-import-boilerplate ignores line-endings
  metaclass-boilerplate no-assert no-basestring no-dict-iteritems no-dict-iterkeys
  no-dict-itervalues no-get-exception no-illegal-filenames no-main-display no-smart-quotes
  no-unicode-literals replace-urlopen shebang shellcheck symlinks use-argspec-type-path
  use-compat-six
)

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
copy="${work}/ansible_collections/roset/storage"
mkdir -p "$(dirname "${copy}")"
cp -a ansible "${copy}"
git -C "${copy}" init -q
git -C "${copy}" add -A

args=()
for test in "${offline_tests[@]}"; do
  args+=(--test "${test}")
done
cd "${copy}"
LC_ALL=C.UTF-8 ansible-test sanity --local --python "$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --color no "${args[@]}"
