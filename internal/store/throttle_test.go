package store_test

import (
	"bytes"
	"context"
	"testing"
)

func TestThrottleRoundTrip(t *testing.T) {
	db := MustOpenDB(t)
	ctx := context.Background()
	if _, ok, err := db.LoadThrottle(ctx); err != nil || ok {
		t.Fatalf("empty database: ok=%v err=%v", ok, err)
	}
	// The store keeps the throttle's JSON as the throttle wrote it.
	want := []byte(`{"taken_at_ms":1700000000000,"enabled":true,"keys":[{"peer":"node-a:1984","type":"chunk","timestamps":[1699999990000,1699999995000]}]}`)
	if err := db.SaveThrottle(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.LoadThrottle(ctx)
	if err != nil || !ok || !bytes.Equal(got, want) {
		t.Fatalf("%s %v %v", got, ok, err)
	}
	if err := db.SaveThrottle(ctx, []byte("{not json")); err == nil {
		t.Error("SaveThrottle took bytes that are not JSON")
	}
}
