package chaos

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

// ProfilingEnv turns on the daemon's /debug/pprof/ (admin.pprof) for
// SaveHeapProfile: give it as Daemon.Env.
var ProfilingEnv = []string{"LIMITERD_ADMIN__PPROF=true"}

// SaveHeapProfile writes the daemon's heap profile, taken after a
// collection (/debug/pprof/heap?gc=1: the live heap by allocation site),
// to path, for `go tool pprof -top -base WARM END`. The daemon must run
// with ProfilingEnv.
func SaveHeapProfile(admin, path string) error {
	req, err := http.NewRequest("GET", admin+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := apiClient.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("heap profile: %s: %s", resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}
