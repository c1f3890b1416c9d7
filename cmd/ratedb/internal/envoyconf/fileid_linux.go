package envoyconf

import (
	"os"
	"syscall"
)

// statID returns the identity of the file fi describes, with its change
// time (ctime), which every write, truncation, chmod, chown, rename and
// utime sets to the current time and which no user can set back.
func statID(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{
		dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mode: fi.Mode(),
		mtime: fi.ModTime().UnixNano(), ctime: st.Ctim.Nano(),
	}, true
}
