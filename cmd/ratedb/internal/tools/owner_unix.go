//go:build unix

package tools

import (
	"os"
	"syscall"
)

// owner returns the user and group that own the file fi describes.
func owner(fi os.FileInfo) (uid, gid int, ok bool) {
	if fi == nil {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
