package store_test

import (
	"fmt"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/limiterd/limiterd/internal/live"
)

// BenchmarkAddExemptionAt14000: adding (and removing) one exemption
// beside 14 000 others, fsync off: what an add costs the store beyond
// its write. It used to decode every stored exemption to look for the
// same one.
func BenchmarkAddExemptionAt14000(b *testing.B) {
	db := MustOpenDB(b)
	db.Bolt().NoSync = true
	err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket([]byte("exemptions"))
		for i := range 14000 {
			seq, _ := bk.NextSequence()
			v := fmt.Appendf(nil, `{"kind":"deny_peer","value":"10.%d.%d.%d","note":"bulk"}`, i>>16, (i>>8)&255, i&255)
			if err := bk.Put([]byte{0, 0, 0, 0, 0, 0, byte(seq >> 8), byte(seq)}, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	e := live.Exemption{Kind: live.DenyPeer, Value: "192.0.2.1"}
	a := audit("exemption.add", "deny_peer", nil, e.Value)
	// plain: limiterd alone; recorded: in cluster mode, each edit's record
	// kept in its transaction (decision 221).
	for _, name := range []string{"plain", "recorded"} {
		b.Run(name, func(b *testing.B) {
			if name == "recorded" {
				db.SetRecorder(&stamper{})
				defer db.SetRecorder(nil)
			}
			for b.Loop() {
				if err := db.AddExemption(ctx, e, a); err != nil {
					b.Fatal(err)
				}
				if err := db.RemoveExemption(ctx, e, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
