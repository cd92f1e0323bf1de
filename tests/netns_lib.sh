# Sourced by the tests of emulated hosts: exits 77 (skipped), saying why, where network
# namespaces cannot be made here (not root, no iproute2, or `ip netns add` refused).
[ "$(id -u)" = 0 ] || { echo "skipped: network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN)"; exit 77; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "skipped: iproute2 (ip, tc) missing"; exit 77; }
netns_probe=dtprobe-$$
if ! netns_why=$(ip netns add "$netns_probe" 2>&1); then
    echo "skipped: cannot create a network namespace here (ip netns add: $netns_why)"
    exit 77
fi
ip netns del "$netns_probe"
