#!/bin/sh
# Build dist/lispm-VERSION.tar, installable with `package-install-file'.
# `eask package' needs package-build, which cannot be had offline; this
# lays out the same tar by hand, Python sources included.
set -eu
cd "$(dirname "$0")/.."
EMACS=${EMACS:-emacs}
version=$(sed -n 's/^;; Version: *//p' elisp/lispm.el)
out=${1:-dist}
stage="$out/lispm-$version"
rm -rf "$stage" "$out/lispm-$version.tar"
mkdir -p "$stage/python" "$stage/apps" "$stage/roles"
cp elisp/*.el "$stage/"
rm -f "$stage/lispm-autoloads.el"
for f in elisp/apps/*.el elisp/apps/*.org; do
    [ -e "$f" ] && cp "$f" "$stage/apps/"
done
rmdir "$stage/apps" 2>/dev/null || true
cp elisp/roles/*.org "$stage/roles/"
cp python/pyproject.toml "$stage/python/"
cp -r python/lispm_sidecar "$stage/python/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
"$EMACS" --batch -Q -l scripts/mkpkg.el elisp/lispm.el "$stage"
tar -C "$out" -cf "$out/lispm-$version.tar" "lispm-$version"
rm -rf "$stage"
echo "$out/lispm-$version.tar"
