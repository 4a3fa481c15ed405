#!/bin/sh
# A man page from a program's --help (common/process/command_line.cc writes it), gzipped as
# Debian ships them:
#     help_to_man.sh BINARY NAME SUMMARY OUT.1.gz
# --help reads as
#     NAME VERSION (commit C)          the version line
#                                      blank
#     usage line(s)                    indented continuation lines belong to the usage
#     description lines                up to a blank line
#     Group title:                     then per flag
#       --flag=KIND  (default: D)
#           what it does
#     Flags take dashes ... .          a closing note
# and becomes NAME, SYNOPSIS, DESCRIPTION, OPTIONS (a subsection per group), NOTES and SEE ALSO.
# awk, sed and gzip only: every Debian system has them, so the build needs nothing more.
set -eu
binary=$1 name=$2 summary=$3 out=$4
help=$("$binary" --help)
mkdir -p "$(dirname "$out")"
printf '%s\n' "$help" | awk -v name="$name" -v summary="$summary" '
# roff: a backslash is \e, every dash \- (copied flags must paste as ASCII), and a line must
# not start with a control character.
function esc(s) {
  gsub(/\\/, "\\e", s)
  gsub(/-/, "\\-", s)
  sub(/^[.'"'"']/, "\\\\\\&&", s)
  return s
}
# "  --max-tokens=INT  (default: 0)" as bold flag, italic kind, then the rest.
function flag(s,   head, rest, eq) {
  sub(/^ +/, "", s)
  head = s; rest = ""
  if (match(s, /  +/)) { head = substr(s, 1, RSTART - 1); rest = substr(s, RSTART + RLENGTH) }
  eq = index(head, "=")
  if (eq) head = "\\fB" esc(substr(head, 1, eq - 1)) "\\fR=\\fI" esc(substr(head, eq + 1)) "\\fR"
  else head = "\\fB" esc(head) "\\fR"
  return rest == "" ? head : head "  " esc(rest)
}
NR == 1 {
  version = $2
  upper = toupper(name)
  printf ".TH %s 1 \"\" \"%s\" \"User Commands\"\n", esc(upper), esc("Pagoda " version)
  print ".nh"  # no hyphenation: flag names and paths stay whole
  printf ".SH NAME\n%s \\- %s\n", esc(name), esc(summary)
  state = "before_usage"
  next
}
state == "before_usage" && /^$/ { next }
state == "before_usage" { print ".SH SYNOPSIS\n.nf"; print esc($0); state = "usage"; next }
state == "usage" && /^ / { print esc($0); next }
state == "usage" && /^$/ { print ".fi"; state = "options"; next }
state == "usage" { print ".fi\n.SH DESCRIPTION"; print esc($0); state = "description"; next }
state == "description" && /^$/ { state = "options"; next }
state == "description" { print esc($0); next }
state == "options" && /^$/ { next }
/^[^ ].*:$/ {
  if (!options) { print ".SH OPTIONS"; options = 1 }
  sub(/:$/, "")
  print ".SS " esc($0)
  next
}
/^  -/ { print ".TP\n" flag($0); next }
/^   / { sub(/^ +/, ""); print esc($0); next }
/^$/ { next }
{ if (!notes) { print ".SH NOTES"; notes = 1 } else print ".PP"; print esc($0) }
END {
  printf ".SH SEE ALSO\n"
  n = split("pagoda pagoda-router pagoda-worker", pages, " ")
  sep = ""
  for (i = 1; i <= n; i++) {
    if (pages[i] == name) continue
    printf "%s.BR %s (1)", sep, esc(pages[i]); sep = ",\n"
  }
  printf "\n.PP\nThe reference: docs/ in the Pagoda source (serving.md, install.md).\n"
}
' | gzip -9n > "$out"
