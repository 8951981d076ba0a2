package main

import (
	"os"
	"path/filepath"

	"github.com/limiterd/limiterd/internal/cluster"
	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/fleet"
	"github.com/limiterd/limiterd/internal/persist"
	"github.com/limiterd/limiterd/internal/store"
	"github.com/limiterd/limiterd/internal/web"
)

// fleetBoard is where the instances of a cluster publish their summaries
// (docs/dashboard.md, "The fleet"): cluster mode's own Redis, through its
// client; nil outside cluster mode.
func fleetBoard(b *cluster.Backend) fleet.Board {
	if b == nil {
		return nil
	}
	return fleet.NewRedisBoard(b.Client())
}

// instanceName names this instance on the pages and in the fleet: cluster
// mode's instance name, else the host's.
func instanceName(b *cluster.Backend) string {
	if b != nil {
		return b.Instance()
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "limiterd"
}

// storeHealth reports the snapshots and the database's size for the
// dashboard's health.
func storeHealth(snaps *persist.Snapshotter, db *store.DB) func() web.StoreHealth {
	return func() web.StoreHealth {
		st := snaps.Status()
		return web.StoreHealth{SnapshotOK: st.OK, SnapshotFailed: st.Failed, SnapshotError: st.Err, SnapshotEvery: st.Every, DBBytes: db.Size()}
	}
}

// tokenHint says on the login page where the admin token is: the
// configuration file's admin.token, the file admin.token_file names, or
// the one generated in the data directory.
func tokenHint(cfg *config.Config, configFile string) string {
	switch {
	case cfg.Admin.Token != "" && configFile != "":
		return "The admin token is admin.token in " + configFile + " (or the environment's LIMITERD_ADMIN__TOKEN)."
	case cfg.Admin.Token != "":
		return "The admin token is admin.token of the configuration (the environment's LIMITERD_ADMIN__TOKEN)."
	case cfg.Admin.TokenFile != "":
		return "The admin token is in " + absPath(cfg.Admin.TokenFile) + " (admin.token_file)."
	}
	return "The admin token is in " + absPath(filepath.Join(cfg.Server.DataDir, "admin.token")) + ", generated at the first start (readable by the user limiterd runs as)."
}
