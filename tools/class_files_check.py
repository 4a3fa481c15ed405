#!/usr/bin/env python3
"""The house rule, checked (STYLE: one class, one file): fails when the members of one class are
defined in more than one .cc file, which is how a class outgrowing ~450 lines gets cut into
sibling files instead of giving a collaborator a file of its own. Reads every tracked .cc of
the given folders; a member definition is a line at file scope that starts a function named
Class::member (or a nested Outer::Inner::member). Usage: class_files_check.py DIR..."""
import collections
import re
import subprocess
import sys

# At column 0 (file scope, clang-format's Google style): [return type] Class::member( or
# Class::Class( / Class::~Class(. Not `Class::Nested Class::f(`'s return type: the last
# qualified name before '(' is the one defined.
DEFINITION = re.compile(r'^(?!\s)(?:[\w:<>,*&\s]+?\s+[*&]*)?((?:\w+::)+)~?(\w+|operator\S+)\s*\(')
NAMESPACES = {'pagoda', 'std', 'absl', 'grpc', 'v1', 'testing'}


def classes_defined(path):
    found = set()
    with open(path, encoding='utf-8') as f:
        for line in f:
            m = DEFINITION.match(line)
            if not m:
                continue
            qualifiers = [q for q in m.group(1).split('::') if q and q not in NAMESPACES]
            if qualifiers:
                found.add('::'.join(qualifiers))
    return found


def main(dirs):
    files = subprocess.run(['git', 'ls-files'] + [f'{d}/*.cc' for d in dirs], check=True,
                           capture_output=True, text=True).stdout.split()
    where = collections.defaultdict(set)
    for path in files:
        if path.endswith('_test.cc'):
            continue
        for cls in classes_defined(path):
            where[cls].add(path)
    split = {cls: sorted(paths) for cls, paths in where.items() if len(paths) > 1}
    for cls, paths in sorted(split.items()):
        print(f'class_files_check: {cls} is defined in {len(paths)} files: {", ".join(paths)}')
    if split:
        print('class_files_check: FAILED: one class, one file (STYLE); give the part that grew '
              'a collaborator of its own instead of a sibling file')
        return 1
    print(f'class_files_check: {len(where)} classes in {len(files)} files, each in one file')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:] or ['cli', 'common', 'lib', 'proto', 'router', 'tools', 'worker']))
