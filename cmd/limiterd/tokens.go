package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/web"
)

// tokens returns the tokens the admin listener accepts: the main admin
// token (adminToken) and the [[admin.tokens]], their files read. Called
// at start and on every SIGHUP; an error names the key and the file.
func (m *Main) tokens(cfg *config.Config) (string, []web.Token, error) {
	admin, err := m.adminToken(cfg)
	if err != nil {
		return "", nil, err
	}
	secrets, err := cfg.TokenSecrets()
	if err != nil {
		return "", nil, err
	}
	named := make([]web.Token, 0, len(secrets))
	for _, t := range secrets {
		sc, err := web.ParseScope(t.Scope)
		if err != nil {
			return "", nil, err
		}
		named = append(named, web.Token{Name: t.Name, Scope: sc, Secret: t.Token})
	}
	return admin, named, nil
}

// adminToken returns the main admin token: admin.token, else the one in
// admin.token_file, else the one stored in <data_dir>/admin.token,
// generated (mode 0600) on first start. The token itself is never logged;
// the log says which file holds a generated one.
func (m *Main) adminToken(cfg *config.Config) (string, error) {
	if t := cfg.Admin.Token; t != "" {
		if len(t) < config.MinTokenLen {
			// Only the login form limits guesses (decision 22): the
			// token itself must be unguessable.
			m.log.Warn("the admin token is short: use at least 24 random characters, or leave admin.token unset to have one generated", "length", len(t))
		}
		return t, nil
	}
	if cfg.Admin.TokenFile != "" {
		return config.ReadTokenFile("admin.token_file", cfg.Admin.TokenFile)
	}
	path := filepath.Join(cfg.Server.DataDir, "admin.token")
	t, err := config.ReadTokenFile("admin.token_file", path)
	if err == nil {
		return t, nil
	}
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		return "", fmt.Errorf("%w (the admin token limiterd generated: fix the file, or delete it to have a new one generated)", err)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t = hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("store the admin token: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("store the admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("store the admin token: %w", err)
	}
	m.log.Info("generated an admin token: it is in the file (mode 0600), and is not logged", "file", path)
	return t, nil
}

// readTokenFlag reads the token a client command (backup) authenticates
// with: the file given, else the daemon's own admin token as the config
// says (without generating one).
func readTokenFlag(file string, cfg *config.Config) (token, from string, err error) {
	switch {
	case file != "":
		t, err := config.ReadTokenFile("-token-file", file)
		return t, file, err
	case cfg.Admin.Token != "":
		return strings.TrimSpace(cfg.Admin.Token), "admin.token", nil
	case cfg.Admin.TokenFile != "":
		t, err := config.ReadTokenFile("admin.token_file", cfg.Admin.TokenFile)
		return t, cfg.Admin.TokenFile, err
	}
	path := filepath.Join(cfg.Server.DataDir, "admin.token")
	t, err := config.ReadTokenFile("admin.token_file", path)
	return t, path, err
}

// checkTokenFiles reads every token file the config names (admin.token_file
// and the [[admin.tokens]]'), for check-config: a file others can read or
// holding a short token is an error naming the key and the file.
func checkTokenFiles(cfg *config.Config) error {
	var errs []error
	if cfg.Admin.TokenFile != "" {
		if _, err := config.ReadTokenFile("admin.token_file", cfg.Admin.TokenFile); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := cfg.TokenSecrets(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
