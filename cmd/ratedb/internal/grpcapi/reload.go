package grpcapi

import (
	"context"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// Reload loads the config at path (a file or a directory) and, if it is
// valid, swaps it in atomically. On error the current config stays in use,
// the reason is logged (file name and problem, never a request's values),
// and the error is returned.
func (s *Server) Reload(path string) error {
	cfg, err := envoyconf.Load(path)
	if err != nil {
		s.opts.Logger.Error("envoy config: reload failed, keeping the previous config", "path", path, "err", err)
		return err
	}
	s.SetConfig(cfg)
	s.opts.Logger.Info("envoy config: loaded", "path", path, "files", len(cfg.Files()), "rules", len(cfg.Rules()))
	return nil
}

// Watch reloads path whenever its files' names, sizes or modification
// times change, checking every interval, until ctx is done. It polls
// instead of using inotify so that it needs no dependency and also sees
// changes made through symlink swaps (as Kubernetes ConfigMaps do).
// Whatever the outcome of a reload, the same change is not reloaded twice.
func (s *Server) Watch(ctx context.Context, path string, interval time.Duration) {
	last := envoyconf.Stamp(path)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cur := envoyconf.Stamp(path); cur != last {
			last = cur
			_ = s.Reload(path) // logged by Reload
		}
	}
}
