"""Which addresses an outbound request may reach.

Everything that is not a public unicast address is refused: loopback, private, link-local (cloud
metadata at 169.254.169.254 among them), IPv6 site-local (fec0::/10), shared (100.64.0.0/10),
multicast, reserved, unspecified, the few ranges IANA marks not global that ``ipaddress`` misses,
and the few metadata services that sit on public addresses. An IPv6 address that carries an IPv4
one (mapped, 6to4, NAT64) is judged by the IPv4 address inside it.
"""

import ipaddress
import socket

# Metadata services on addresses the ranges above do not cover.
METADATA = (
    ipaddress.ip_network("168.63.129.16/32"),  # Azure WireServer
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS IMDS over IPv6 (private too; named for the reader)
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Ranges IANA marks not globally reachable that this Python's ipaddress still calls global.
NOT_GLOBAL = (
    ipaddress.ip_network("fec0::/10"),  # site-local, deprecated (RFC 3879)
    ipaddress.ip_network("3fff::/20"),  # documentation (RFC 9637)
    ipaddress.ip_network("192.0.0.0/24"),  # IETF protocol assignments (RFC 6890)
    ipaddress.ip_network("192.88.99.0/24"),  # 6to4 relay anycast, deprecated (RFC 7526)
)


def parse_networks(entries):
    """CIDR strings (or single addresses) as networks; ValueError names the bad entry."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not an address or network (such as 10.0.0.0/8)") from None
    return tuple(networks)


def literal_address(host):
    """The address ``host`` spells, in any form a resolver accepts (dotted, decimal 2130706433,
    octal 0177.0.0.1, hex 0x7f.1, short 127.1, IPv6 with or without brackets), or None for a name."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        # inet_aton reads the legacy forms exactly as getaddrinfo would when connecting.
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def embedded_ipv4(ip):
    if ip.version != 6:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip, allowed=()):
    """Why ``ip`` may not be reached (a few words), or None when it may."""
    inner = embedded_ipv4(ip)
    for candidate in (ip, inner):
        if candidate is not None and any(candidate.version == net.version and candidate in net for net in allowed):
            return None
    if inner is not None:
        reason = refusal(inner)
        return f"{reason} (inside {ip})" if reason else None
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified:
        return "the unspecified address"
    if any(ip.version == net.version and ip in net for net in METADATA):
        return "a cloud metadata address"
    if ip.is_private:
        return "a private address"
    if getattr(ip, "is_site_local", False):  # fec0::/10: deprecated (RFC 3879), yet Python calls it global
        return "a site-local address"
    if any(ip.version == net.version and ip in net for net in NOT_GLOBAL):
        return "not a public address"
    if ip.is_reserved or not ip.is_global:
        return "not a public address"
    return None
