package squall.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * The local file system for Spark's streaming checkpoints, without forking processes.
 *
 * Without Hadoop's native library, every checkpoint file costs Hadoop's local file
 * system a forked chmod per file and a forked readlink per status check: about ten
 * processes per file, two files per micro-batch, 100 ms and more of each micro-batch
 * on a busy machine. This one sets permissions with java.nio and has no symlinks.
 * Used as fs.AbstractFileSystem.file.impl (the FileContext that checkpoints use).
 */
public class NoForkLocalFs extends ChecksumFs {
    public NoForkLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(uri, conf));
    }

    public NoForkLocalFs(Configuration conf) throws IOException, URISyntaxException {
        this(FsConstants.LOCAL_FS_URI, conf);
    }

    /** The raw (checksum-less) layer: org.apache.hadoop.fs.local.RawLocalFs without links. */
    public static class Raw extends DelegateToFileSystem {
        public Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new NoForkFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;
        }

        @Override
        public boolean isValidName(String src) {
            return true;
        }

        @Override
        public boolean supportsSymlinks() {
            return false;
        }

        @Override
        public FileStatus getFileLinkStatus(Path f) throws IOException {
            return getFileStatus(f);
        }
    }

    /** RawLocalFileSystem with java.nio permissions and no readlink. */
    public static class NoForkFileSystem extends RawLocalFileSystem {
        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
        }

        @Override
        public FileStatus getFileLinkStatus(Path f) throws IOException {
            return getFileStatus(f);
        }

        static Set<PosixFilePermission> posix(short mode) {
            PosixFilePermission[] bits = {
                PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
                PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
                PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
                PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
                PosixFilePermission.OWNER_READ,
            };
            Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
            for (int i = 0; i < bits.length; i++) {
                if ((mode & (1 << i)) != 0) {
                    out.add(bits[i]);
                }
            }
            return out;
        }
    }
}
