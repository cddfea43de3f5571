#!/usr/bin/env bash
# Fails if git tracks a build output: an executable binary (ELF, Mach-O, PE,
# whatever its name or mode) or any file over 1 MB. `go get` downloads every
# tracked file of the module, so one stray binary reaches every user.
#
# Exceptions: none. Add a path to allowed below, with the reason, only for a
# file that must be tracked and cannot be smaller.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

limit=$((1024 * 1024))
allowed=()

bad=0
while IFS= read -r -d '' f; do
	[[ -f "$f" ]] || continue
	for a in "${allowed[@]+"${allowed[@]}"}"; do
		[[ "$f" == "$a" ]] && continue 2
	done
	size=$(stat -c %s "$f")
	magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
	case "$magic" in
	7f454c46) kind="an ELF executable" ;;
	cffaedfe | cefaedfe | feedfacf | feedface | cafebabe) kind="a Mach-O executable" ;;
	4d5a*) kind="a PE (Windows) executable" ;;
	*) kind="" ;;
	esac
	if [[ -n "$kind" ]]; then
		echo "tracked build output: $f is $kind ($size bytes)"
		bad=1
	elif ((size > limit)); then
		echo "tracked file over 1 MB: $f ($size bytes)"
		bad=1
	fi
done < <(git ls-files -z)

if ((bad)); then
	echo "remove it from git (git rm --cached), and build into an ignored directory such as .cache/" >&2
	exit 1
fi
