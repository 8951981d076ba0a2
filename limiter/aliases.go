package limiter

// The types and functions of the core's pure sub-packages that the rest
// of limiterd knows by their limiter names.

import (
	"net/netip"

	"github.com/limiterd/limiterd/limiter/peerid"
	"github.com/limiterd/limiterd/limiter/peerkey"
	"github.com/limiterd/limiterd/limiter/prefixset"
	"github.com/limiterd/limiterd/limiter/schedule"
	"github.com/limiterd/limiterd/limiter/tsring"
)

// Schedule places a group's ticks on a fixed timeline (package schedule):
// tick Index at Anchor, one every Interval ms, a change of interval taking
// effect at the next tick.
type Schedule = schedule.Schedule

// NewSchedule returns a schedule whose tick 0 falls at epoch.
func NewSchedule(epoch, interval int64) Schedule { return schedule.New(epoch, interval) }

// Peer is a request's source (package peerid): its address and the key
// limits track it under. An alias, not a move: every decision takes one
// (Limiter.Decide), and the module names it limiter.Peer beside the
// Limiter that decides for it.
type Peer = peerid.Peer

// PeerKey is the compact, comparable identity limits are tracked under
// (package peerkey): an IPv4 address, an IPv6 prefix, or an opaque key.
// The zero PeerKey is invalid.
type PeerKey = peerkey.Key

// KeyFromAddr returns the key of addr: IPv4 (and IPv4-mapped IPv6) by the
// whole address, IPv6 by its first ipv6Prefix bits (peerkey.FromAddr).
func KeyFromAddr(addr netip.Addr, ipv6Prefix int) PeerKey { return peerkey.FromAddr(addr, ipv6Prefix) }

// OpaqueKey returns the fallback key of a source that is not an IP address
// (peerkey.Opaque).
func OpaqueKey(raw string) PeerKey { return peerkey.Opaque(raw) }

// ParsePeerKey parses the forms PeerKey.String returns (peerkey.Parse).
func ParsePeerKey(s string) (PeerKey, error) { return peerkey.Parse(s) }

// PrefixSet is a set of IP addresses and CIDRs (package prefixset): the
// exempt peers, the deny list, the trusted proxies. Safe for concurrent
// reads.
type PrefixSet = prefixset.Set

// ParsePrefix parses one item of an address list: an address or a CIDR,
// canonical (prefixset.Parse).
func ParsePrefix(s string) (netip.Prefix, error) { return prefixset.Parse(s) }

// NewPrefixSet returns the set of the given prefixes (prefixset.New).
func NewPrefixSet(ps []netip.Prefix) *PrefixSet { return prefixset.New(ps) }

// ParsePrefixSet parses an address list into a set (prefixset.ParseSet).
func ParsePrefixSet(items []string) (*PrefixSet, error) { return prefixset.ParseSet(items) }

// window is a (peer, group)'s sliding window of timestamps (package
// tsring).
type window = tsring.Ring
