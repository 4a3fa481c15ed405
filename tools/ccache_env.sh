# Sourced by tools/test.sh and tools/demo.sh: compile through ccache when it is installed
# (setup.sh installs it; PAGODA_CCACHE=0 turns it off). Sets pagoda_ccache_args for cmake.
# The keys let two checkouts of one commit share a cache, as CI's fresh-machine stage shares the
# first stage's: paths relative to the checkout (base_dir), the compiler by its content (a
# chroot's g++ is the same file with another mtime), and -Werror outside the key (it changes
# no object file, only whether a warning stops the build).
pagoda_ccache_args=()
if [ "${PAGODA_CCACHE:-1}" != 0 ] && command -v ccache > /dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  export CCACHE_COMPILERCHECK=${CCACHE_COMPILERCHECK:-content}
  export CCACHE_IGNOREOPTIONS=${CCACHE_IGNOREOPTIONS:--Werror}
  pagoda_ccache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
