package oci

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// User is a resolved process identity.
type User struct {
	UID, GID       uint32
	AdditionalGids []uint32
	// Name is the user's name from /etc/passwd, empty when the uid has no entry.
	Name string
}

type passwdEntry struct {
	name     string
	uid, gid uint32
}

func readPasswd(rootfs string) []passwdEntry {
	var out []passwdEntry
	scanColonFile(filepath.Join(rootfs, "etc/passwd"), func(p []string) {
		uid, e1 := strconv.ParseUint(p[2], 10, 32)
		gid, e2 := strconv.ParseUint(p[3], 10, 32)
		if e1 == nil && e2 == nil {
			out = append(out, passwdEntry{p[0], uint32(uid), uint32(gid)})
		}
	})
	return out
}

// scanColonFile calls fn with the fields of every line of an /etc/passwd- or
// /etc/group-style file that has at least four; a missing file has none.
func scanColonFile(path string, fn func([]string)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p := strings.Split(sc.Text(), ":"); len(p) >= 4 {
			fn(p)
		}
	}
}

type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

func readGroup(rootfs string) []groupEntry {
	var out []groupEntry
	scanColonFile(filepath.Join(rootfs, "etc/group"), func(p []string) {
		gid, err := strconv.ParseUint(p[2], 10, 32)
		if err != nil {
			return
		}
		var m []string
		if p[3] != "" {
			m = strings.Split(p[3], ",")
		}
		out = append(out, groupEntry{p[0], uint32(gid), m})
	})
	return out
}

// ResolveUser turns the container's identity into ids, reading the rootfs's /etc/passwd
// and /etc/group. spec is "user", "uid", "user:group" or "uid:gid" (the image's User) and
// is overridden by runAsUser/runAsUserName/runAsGroup when those are set. Groups listing
// the user in /etc/group are added unless skipImageGroups.
func ResolveUser(rootfs, spec string, runAsUser *int64, runAsUserName string, runAsGroup *int64, skipImageGroups bool) (User, error) {
	userPart, groupPart, _ := strings.Cut(spec, ":")
	if runAsUser != nil {
		userPart = strconv.FormatInt(*runAsUser, 10)
		groupPart = ""
	} else if runAsUserName != "" {
		userPart = runAsUserName
		groupPart = ""
	}
	var u User
	pw := readPasswd(rootfs)
	gr := readGroup(rootfs)
	if userPart == "" {
		userPart = "0"
	}
	if n, err := strconv.ParseUint(userPart, 10, 32); err == nil {
		u.UID = uint32(n)
		for _, e := range pw {
			if e.uid == u.UID {
				u.GID, u.Name = e.gid, e.name
				break
			}
		}
	} else {
		found := false
		for _, e := range pw {
			if e.name == userPart {
				u.UID, u.GID, u.Name, found = e.uid, e.gid, e.name, true
				break
			}
		}
		if !found {
			return u, fmt.Errorf("user %q is not in the image's /etc/passwd: use a numeric uid or add the user to the image", userPart)
		}
	}
	if groupPart != "" {
		if n, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			u.GID = uint32(n)
		} else {
			found := false
			for _, g := range gr {
				if g.name == groupPart {
					u.GID, found = g.gid, true
					break
				}
			}
			if !found {
				return u, fmt.Errorf("group %q is not in the image's /etc/group: use a numeric gid", groupPart)
			}
		}
	}
	if runAsGroup != nil {
		u.GID = uint32(*runAsGroup)
	}
	if u.Name != "" && !skipImageGroups {
		for _, g := range gr {
			for _, m := range g.members {
				if m == u.Name && g.gid != u.GID {
					u.AdditionalGids = append(u.AdditionalGids, g.gid)
				}
			}
		}
	}
	return u, nil
}
