#!/usr/bin/env bash
# Install mlir-opt 22 (with mlir-runner) from apt: Debian's `mlir-22-tools`, which puts
# it in /usr/lib/llvm-22/bin. Where the Debian release's own sources lack the package,
# apt.llvm.org's repository for that release is added first. Does nothing when
# mlir-opt 22 is already there. Needs root (or sudo).
set -euo pipefail
MLIR_OPT=/usr/lib/llvm-22/bin/mlir-opt
if [ -x "$MLIR_OPT" ] && "$MLIR_OPT" --version | grep -q "version 22\."; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
apt_get() {
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -y -qq "$@"
}
apt_get update
# Read the policy whole before matching: under pipefail, `grep -q` closing the pipe
# early makes apt-cache die of SIGPIPE and the test fail although the package is there.
policy=$(apt-cache policy mlir-22-tools)
if ! grep -q "Candidate: [0-9]" <<<"$policy"; then
    # Not in this release's sources: LLVM's own apt repository has it.
    . /etc/os-release
    apt_get install ca-certificates curl gnupg
    curl -fsSL https://apt.llvm.org/llvm-snapshot.gpg.key \
        | $SUDO gpg --dearmor -o /usr/share/keyrings/apt.llvm.org.gpg
    echo "deb [signed-by=/usr/share/keyrings/apt.llvm.org.gpg] http://apt.llvm.org/${VERSION_CODENAME}/ llvm-toolchain-${VERSION_CODENAME}-22 main" \
        | $SUDO tee /etc/apt/sources.list.d/llvm-22.list > /dev/null
    apt_get update
fi
apt_get install mlir-22-tools
"$MLIR_OPT" --version | grep "version 22\."
