// A one-node HDFS for the tests (a NameNode and a DataNode in one JVM, Hadoop's own
// MiniDFSCluster): java -cp <hadoop-client-minicluster and pyspark's jars> MiniHdfs.java DIR
// PORT prints "ready hdfs://localhost:PORT" once it serves, and stops when stdin closes.
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public class MiniHdfs {
  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, args[0]);
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(Integer.parseInt(args[1])).numDataNodes(1).build();
    cluster.waitActive();
    System.out.println("ready " + cluster.getURI());
    System.out.flush();
    while (System.in.read() != -1) { }
    cluster.shutdown();
  }
}
