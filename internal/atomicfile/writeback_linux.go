package atomicfile

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE (linux/fs.h): start writing
// the range's dirty pages, without waiting for them.
const syncFileRangeWrite = 0x2

// startWriteback asks the kernel to begin writing n bytes of f from off to
// the disk. It is a hint: an error (a file system without support) is
// ignored, since the fsync that follows writes and checks everything.
func startWriteback(f *os.File, off, n int64) {
	_ = syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWrite)
}
