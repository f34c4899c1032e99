#!/usr/bin/env bash
# Trino, the outside reader of tests/test_trino.py: trino-server from Maven Central (io.trino), checked
# against the SHA-256 pinned here, with only what one coordinator reading Delta Lake needs (the launcher,
# lib/, plugin/delta-lake/) extracted into ~/.cache/segaudit/trino/<version> (SEGAUDIT_CACHE moves it),
# outside the repository. Idempotent: silent when it is there. The archive hard-links a plugin's jars to
# the first copy of each (in lib/ or in another plugin): those copies are extracted too, then removed,
# leaving the delta-lake plugin whole. Trino runs on Java 24+, which the test looks for.
set -euo pipefail
VERSION=476
SHA256=cfd5accde17e8ebd251eeeb78aed1f490e77bb3a164d95a0f454bf8a7c1cbd3f
URL="https://repo1.maven.org/maven2/io/trino/trino-server/$VERSION/trino-server-$VERSION.tar.gz"
cache="${SEGAUDIT_CACHE:-$HOME/.cache/segaudit}/trino"
target="$cache/$VERSION"
[ -f "$target/.complete" ] && exit 0
command -v curl >/dev/null 2>&1 || {
  echo "segaudit tests: curl is required to fetch Trino $VERSION (the outside reader of the Trino tests)." \
       "On Debian: sudo apt-get install -y curl (or deselect it: --deselect tests/test_trino.py)" >&2
  exit 2
}
echo "segaudit tests: fetching Trino $VERSION into $target (once, an 821 MB download)" >&2
mkdir -p "$cache"
staging=$(mktemp -d "$cache/.$VERSION-XXXXXX")
trap 'rm -rf "$staging"' EXIT
archive="$staging/trino-server-$VERSION.tar.gz"
curl -fsSL --retry 3 -o "$archive" "$URL"
echo "$SHA256  $archive" | sha256sum --check --status || {
  echo "segaudit tests: $URL does not have the SHA-256 pinned in scripts/trino.sh ($SHA256)" >&2
  exit 2
}
top="trino-server-$VERSION"
wanted=("$top/bin" "$top/lib" "$top/plugin/delta-lake")
# the first copies, outside what is wanted, that the delta-lake plugin's hard links name
tar -tvzf "$archive" | sed -n "s|^h.* $top/plugin/delta-lake/[^ ]* link to \\(.*\\)\$|\\1|p" \
  | { grep -v -e "^$top/lib/" -e "^$top/plugin/delta-lake/" || true; } | sort -u >"$staging/copies"
tar -xzf "$archive" -C "$staging" "${wanted[@]}" -T "$staging/copies"
(cd "$staging" && xargs -r rm -f <copies)
find "$staging/$top/plugin" -mindepth 1 -maxdepth 1 -type d ! -name delta-lake -exec rm -rf {} +
[ -x "$staging/$top/bin/launcher" ] && [ -d "$staging/$top/plugin/delta-lake" ] || {
  echo "segaudit tests: $URL did not hold bin/launcher and plugin/delta-lake/" >&2
  exit 2
}
echo "$VERSION" >"$staging/$top/.complete"
[ -e "$target" ] && [ ! -f "$target/.complete" ] && rm -rf "$target"  # an interrupted extraction
mv -T "$staging/$top" "$target" 2>/dev/null || [ -f "$target/.complete" ]  # or another process won the race
