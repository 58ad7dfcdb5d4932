// SPDX-License-Identifier: MIT
// Staking contracts for Lynn/EVMQuest-v0.
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// @notice MasterChef-style reward pool: stake a token (a plain ERC-20 or an LP token), earn
/// `rewardPerBlock` of the reward token shared pro rata. Deposits and withdrawals harvest first.
contract RewardPool {
    using SafeERC20 for IERC20;

    struct UserInfo {
        uint256 amount;
        uint256 rewardDebt;
    }

    uint256 private constant ACC = 1e12;

    IERC20 public immutable stakingToken;
    IERC20 public immutable rewardToken;
    uint256 public immutable rewardPerBlock;
    uint256 public lastRewardBlock;
    uint256 public accRewardPerShare;
    uint256 public totalStaked;
    mapping(address => UserInfo) public userInfo;

    event Deposit(address indexed user, uint256 amount);
    event Withdraw(address indexed user, uint256 amount);
    event Harvest(address indexed user, uint256 amount);
    event EmergencyWithdraw(address indexed user, uint256 amount);

    constructor(IERC20 stakingToken_, IERC20 rewardToken_, uint256 rewardPerBlock_) {
        stakingToken = stakingToken_;
        rewardToken = rewardToken_;
        rewardPerBlock = rewardPerBlock_;
        lastRewardBlock = block.number;
    }

    function _update() internal {
        if (block.number <= lastRewardBlock) return;
        if (totalStaked > 0) {
            accRewardPerShare += ((block.number - lastRewardBlock) * rewardPerBlock * ACC) / totalStaked;
        }
        lastRewardBlock = block.number;
    }

    function pendingReward(address user) public view returns (uint256) {
        UserInfo storage info = userInfo[user];
        uint256 acc = accRewardPerShare;
        if (block.number > lastRewardBlock && totalStaked > 0) {
            acc += ((block.number - lastRewardBlock) * rewardPerBlock * ACC) / totalStaked;
        }
        return (info.amount * acc) / ACC - info.rewardDebt;
    }

    function stakedBalance(address user) external view returns (uint256) {
        return userInfo[user].amount;
    }

    function _harvest(address user) internal {
        UserInfo storage info = userInfo[user];
        uint256 pending = (info.amount * accRewardPerShare) / ACC - info.rewardDebt;
        if (pending > 0) {
            rewardToken.safeTransfer(user, pending);
            emit Harvest(user, pending);
        }
    }

    function deposit(uint256 amount) external {
        _update();
        _harvest(msg.sender);
        UserInfo storage info = userInfo[msg.sender];
        if (amount > 0) {
            stakingToken.safeTransferFrom(msg.sender, address(this), amount);
            info.amount += amount;
            totalStaked += amount;
        }
        info.rewardDebt = (info.amount * accRewardPerShare) / ACC;
        emit Deposit(msg.sender, amount);
    }

    function withdraw(uint256 amount) external {
        UserInfo storage info = userInfo[msg.sender];
        require(info.amount >= amount, "RewardPool: withdraw exceeds stake");
        _update();
        _harvest(msg.sender);
        if (amount > 0) {
            info.amount -= amount;
            totalStaked -= amount;
            stakingToken.safeTransfer(msg.sender, amount);
        }
        info.rewardDebt = (info.amount * accRewardPerShare) / ACC;
        emit Withdraw(msg.sender, amount);
    }

    function harvest() external {
        _update();
        _harvest(msg.sender);
        UserInfo storage info = userInfo[msg.sender];
        info.rewardDebt = (info.amount * accRewardPerShare) / ACC;
    }

    /// @notice Leave with the stake and give up the pending rewards.
    function emergencyWithdraw() external {
        UserInfo storage info = userInfo[msg.sender];
        uint256 amount = info.amount;
        info.amount = 0;
        info.rewardDebt = 0;
        totalStaked -= amount;
        stakingToken.safeTransfer(msg.sender, amount);
        emit EmergencyWithdraw(msg.sender, amount);
    }
}
