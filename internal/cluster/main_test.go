package cluster_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain silences go-redis's own log lines (dial failures the tests
// cause on purpose); the backend's log says what they mean.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}
