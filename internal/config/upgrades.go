package config

import (
	"errors"
	"slices"

	"github.com/limiterd/limiterd/limiter"
)

// Upgrade is a change of a release that refuses a configuration an
// earlier limiterd accepted: the release, the keys it concerns, what
// changed and how to fix a config. CHANGELOG.md's "Upgrade notes" of the
// release list each (a test keeps them in step). The check that refuses
// such a config records its problem with the Upgrade in the problem's Err,
// so that UpgradeOf finds it and check-config and the start-up error say,
// under the problem, what changed and the fix (decision 198).
type Upgrade struct {
	// Release is the first release with the change, "0.1.0".
	Release string
	// Keys are the keys whose problems the change explains.
	Keys []string
	// Change says what changed and why, Fix what to write instead.
	Change, Fix string
}

// Error makes an Upgrade the Err of a problem.
func (u *Upgrade) Error() string { return "changed in limiterd " + u.Release + ": " + u.Change }

// The changes of each release, oldest first; upgrades lists them.
var (
	upgradeForwardedHeader = &Upgrade{Release: "0.1.0", Keys: []string{"peers.forwarded_header"},
		Change: "peers.forwarded_header must be set when peers.trusted_proxies is: limiterd read X-Forwarded-For, then Forwarded, from a trusted proxy, and a client could name itself in the header its proxy does not write",
		Fix:    `set forwarded_header to the one header your proxies write: "x-forwarded-for" behind nginx's proxy_set_header X-Forwarded-For $remote_addr (docs/operations.md, layout B), "forwarded" behind a proxy that writes Forwarded`}
	upgradeForwardedAuto = &Upgrade{Release: "0.1.0", Keys: []string{"peers.forwarded_header"},
		Change: `peers.forwarded_header = "auto" (X-Forwarded-For, then Forwarded) is refused: a client could name itself in the header its proxy does not write`,
		Fix:    `replace "auto" with "x-forwarded-for" or "forwarded", the header your proxies write`}
	upgradeLoopMinimums = &Upgrade{Release: "0.1.0", Keys: []string{"snapshot.interval", "cluster.sync_interval", "throttle.retry_interval"},
		Change: "the intervals that drive a loop have minimums: snapshot.interval 1s, cluster.sync_interval 10ms, throttle.retry_interval 10 ms (a shorter one kept a core busy)",
		Fix:    "raise the interval to its minimum or more (docs/config.md, \"Loop intervals\")"}
	upgradeExposedAdmin = &Upgrade{Release: "0.1.0", Keys: []string{"admin.listen"},
		Change: "an admin listener other machines can reach needs a token set in the config: a generated one is for loopback only",
		Fix:    "set admin.token_file to a file holding a random token (openssl rand -hex 24), or listen on 127.0.0.1"}
	upgradeTokenFiles = &Upgrade{Release: "0.1.0", Keys: []string{"admin.token_file", "admin.tokens.token_file"},
		Change: "a token file must not be readable by every user, and its token must have at least 24 characters",
		Fix:    "chmod 600 the file (640 with the group limiterd runs as), and put a random token of 24 characters or more in it (openssl rand -hex 24)"}
)

// upgrades is every Upgrade, oldest release first.
var upgrades = []*Upgrade{upgradeForwardedHeader, upgradeForwardedAuto, upgradeLoopMinimums, upgradeExposedAdmin, upgradeTokenFiles}

// Upgrades returns every change of a release that refuses a configuration
// an earlier release accepted, oldest release first. The slice and the
// values are new on every call.
func Upgrades() []Upgrade {
	out := make([]Upgrade, len(upgrades))
	for i, u := range upgrades {
		out[i] = *u
		out[i].Keys = slices.Clone(u.Keys)
	}
	return out
}

// UpgradeOf returns the change of a release that explains the problem
// fe, if one does.
func UpgradeOf(fe *limiter.FieldError) (Upgrade, bool) {
	var u *Upgrade
	if fe == nil || !errors.As(fe.Err, &u) {
		return Upgrade{}, false
	}
	return *u, true
}

// upgradeProblem is a problem's Err that has its own text (a parser's)
// and the Upgrade that explains it.
type upgradeProblem struct {
	msg string
	u   *Upgrade
}

func (e *upgradeProblem) Error() string { return e.msg }
func (e *upgradeProblem) Unwrap() error { return e.u }
