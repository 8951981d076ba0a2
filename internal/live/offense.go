package live

import (
	"time"

	"github.com/limiterd/limiterd/limiter/peer"
)

// OffenseSpan is how long the record of offenders remembers a peer: a
// (peer, group) with no rejection for this long is dropped.
const OffenseSpan = 24 * time.Hour

// Offense is one (peer, group)'s rejections in the record of offenders:
// the forensic trace of who the limiter rejected over the last
// OffenseSpan, kept in the database, so that an attack can be reviewed
// after the limiter's entries for it are gone.
type Offense struct {
	Peer  peer.Key `json:"peer"`
	Group string   `json:"group"`
	// Rejections counts the rejections of the last OffenseSpan (an
	// estimate when the limiter samples its decisions).
	Rejections uint64 `json:"rejections"`
	// First and Last are the first and the latest rejection recorded;
	// First is forgotten with the record, after OffenseSpan without one.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}
