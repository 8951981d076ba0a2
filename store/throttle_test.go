package store_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

func TestThrottleRoundTrip(t *testing.T) {
	db := MustOpenDB(t)
	ctx := context.Background()
	if _, ok, err := db.LoadThrottle(ctx); err != nil || ok {
		t.Fatalf("empty database: ok=%v err=%v", ok, err)
	}
	want := limiter.ThrottleSnapshot{TakenAt: 1_700_000_000_000, Enabled: true, Keys: []limiter.ThrottleKeyRecord{
		{Peer: "node-a:1984", Type: "chunk", Timestamps: []int64{1_699_999_990_000, 1_699_999_995_000}},
	}}
	if err := db.SaveThrottle(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.LoadThrottle(ctx)
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v %v %v", got, ok, err)
	}
}
