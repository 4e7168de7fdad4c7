//go:build !amd64 && !arm64

package shm

// shmSysProcessVMReadv is 0 where goddp does not know the syscall number;
// the shm backend then always copies through its slots.
const shmSysProcessVMReadv = 0
