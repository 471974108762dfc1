"""ROS 2 launch file: the ctrl_rl deploy node with rclpy and a params file.

    ros2 launch <path>/ctrl_rl_node.launch.py bundle:=/path/policy.onnx params:=/path/node.yaml

The node is the ``ctrl-rl`` console script (``ctrl-rl deploy node --transport rclpy``), not a
colcon package executable, so it launches from a pip install as well as from a workspace.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.substitutions import LaunchConfiguration


def generate_launch_description() -> LaunchDescription:
    bundle = LaunchConfiguration("bundle")
    params = LaunchConfiguration("params")
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="exported/policy.onnx"),
        DeclareLaunchArgument("params", description="ROS 2 params YAML (ctrl_rl/configs/deploy/node.yaml)"),
        DeclareLaunchArgument("namespace", default_value="", description="ROS namespace of every topic"),
        ExecuteProcess(
            cmd=["ctrl-rl", "deploy", "node", "--transport", "rclpy", "--bundle", bundle, "--params", params,
                 "--namespace", LaunchConfiguration("namespace"), "--ros-args", "--params-file", params],
            output="screen", emulate_tty=True, sigterm_timeout="5",
        ),
    ])
