package grpcapi

import (
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// Reload loads the config at path (a file or a directory) and, if it is
// valid, swaps it in atomically. On error the current config stays in use,
// the reason is logged (file name and problem, never a request's values),
// and the error is returned.
func (s *Server) Reload(path string) error {
	cfg, err := envoyconf.LoadWith(path, s.opts.Load)
	return s.Apply(path, cfg, err)
}

// Apply is Reload with the load done: cfg and err are what loading the
// config at path returned (by envoyconf.LoadWith or a Watcher).
func (s *Server) Apply(path string, cfg *envoyconf.Config, err error) error {
	if err != nil {
		s.opts.Logger.Error("envoy config: reload failed, keeping the previous config", "path", path, "err", err)
		return err
	}
	s.SetConfig(cfg)
	s.opts.Logger.Info("envoy config: loaded", "path", path, "files", len(cfg.Files()), "rules", len(cfg.Rules()))
	return nil
}
