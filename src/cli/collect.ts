// `profcpu collect`: not written yet.
import type { CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';

const command: CommandModule = {
  command: 'collect',
  describe: '(not implemented yet)',
  handler: () => {
    throw new ProfcpuError('USAGE', '`profcpu collect` is not implemented yet');
  },
};

export default command;
