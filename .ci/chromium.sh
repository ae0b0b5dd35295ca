# Sourced by .ci/run: installs Debian's chromium (if missing) for the session page tests, which render
# the report in headless Chromium and fail under CI=true without it.
ensure_chromium() {
  if command -v chromium >/dev/null 2>&1; then
    return
  fi
  echo "ci: installing chromium (Debian package)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium >/dev/null
}
