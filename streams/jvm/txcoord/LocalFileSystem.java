package txcoord;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local filesystem (checksums and all), setting permissions in-process.
 *
 * <p>Without Hadoop's native library, RawLocalFileSystem sets a file's permissions by forking
 * {@code chmod}, and it does so for every file it creates: each Parquet file, Delta commit,
 * checkpoint offset and commit file, state-store changelog, and the checksum file beside each
 * of them. A fork of the Spark JVM is on the path of every micro-batch dozens of times. This
 * sets the same POSIX permission bits with {@link Files#setPosixFilePermissions}. Used as
 * {@code fs.file.impl} when the warehouse is local (coordinator/runtime/spark_session.py).
 */
public final class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new Raw());
  }

  /** The raw filesystem underneath, with {@code setPermission} in-process. */
  public static final class Raw extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
        PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
        PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
        PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
    }

    /** The POSIX permissions of mode {@code mode}'s lower nine bits (rwxrwxrwx). */
    static Set<PosixFilePermission> posix(short mode) {
      Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
      for (int bit = 0; bit < BITS.length; bit++) {
        if ((mode & (1 << bit)) != 0) out.add(BITS[bit]);
      }
      return out;
    }
  }
}
